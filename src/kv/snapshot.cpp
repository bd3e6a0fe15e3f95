#include "kv/snapshot.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include <xxhash.h>

#include "kv/linear_state.h"
#include "kv/paged.h"
#include "kv/rotating.h"
#include "kv/snapshot_payload.h"
#include "util/error.h"

namespace ingot::kv {

namespace {

// The last byte is the format version. 2: KV4 rows are stored rotated, and a
// paged layer may carry its open block's exact rows (docs/kv-cache.md).
// 3: the payload hash is over the hashes of its chunks (restores check chunks
// in parallel).
constexpr char kMagic[8] = {'I', 'N', 'G', 'O', 'T', 'K', 'V', '3'};
constexpr size_t kFixed = 8 + 8 + 8 + 8 + 8;  // magic, json length, header hash, payload hash, payload bytes

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Each layer of a snapshotted sequence: paged (blocks), rotating (its live
// rows) or linear state (its conv window and recurrent state).
struct LayerView {
  const PagedLayerCache* paged = nullptr;
  const RotatingLayerCache* rot = nullptr;
  LinearStateCache* lin = nullptr;
};

std::vector<LayerView> snapshot_layers(const SequenceCache& seq_in, const Pool** pool) {
  auto& seq = const_cast<SequenceCache&>(seq_in);
  std::vector<LayerView> v;
  *pool = nullptr;
  for (int i = 0; i < seq.num_layers(); ++i) {
    LayerView lv;
    lv.paged = dynamic_cast<const PagedLayerCache*>(&seq.layer(i));
    lv.rot = dynamic_cast<const RotatingLayerCache*>(&seq.layer(i));
    lv.lin = dynamic_cast<LinearStateCache*>(&seq.layer(i));
    if (!lv.paged && !lv.rot && !lv.lin)
      fail(ErrorKind::Unsupported, "snapshots need paged, rotating or linear-state layers (layer ", i, ")");
    if (lv.paged && !*pool) *pool = lv.paged->pool().get();
    if (lv.paged && lv.paged->pool().get() != *pool) fail(ErrorKind::InvalidArgument, "snapshot layers come from different pools");
    v.push_back(lv);
  }
  if (!*pool) fail(ErrorKind::Unsupported, "snapshots need at least one paged layer");
  return v;
}

// Bytes of a rotating layer's kept rows in one plane.
size_t rotating_bytes(const LayerSpec& s, DType dt, int64_t kept, bool v) {
  return static_cast<size_t>(kept * s.kv_heads * (v ? s.v_head_dim : s.head_dim)) * dtype_size(dt);
}

// Bytes of a linear-state layer's conv window and recurrent state (float32).
size_t conv_bytes(const LayerSpec& s) { return static_cast<size_t>((s.conv_kernel - 1) * s.conv_channels) * 4; }
size_t ssm_bytes(const LayerSpec& s) {
  return static_cast<size_t>(s.state_heads * s.state_k_dim * s.state_v_dim) * 4;
}

nlohmann::json geometry(const Pool& pool) {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& s : pool.layout()) {
    if (s.kind == LayerKind::LinearState) {
      layers.push_back({"linear", s.conv_channels, s.conv_kernel, s.state_heads, s.state_k_dim, s.state_v_dim});
    } else {
      layers.push_back({s.kv_heads, s.head_dim, s.v_head_dim, s.window});
    }
  }
  return {{"dtype", dtype_name(pool.dtype())},
          {"block_size", pool.options().block_size},
          {"quant", kv_quant_name(pool.options().quant)},
          {"group_size", pool.options().group_size},
          {"layers", layers}};
}

// XXH3-64 over the payload hash, payload size and the JSON.
uint64_t header_hash_of(const uint8_t* fixed, const std::string& js) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  XXH3_64bits_update(st, fixed + 24, 16);
  XXH3_64bits_update(st, js.data(), js.size());
  const uint64_t h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return h;
}

struct Header {
  nlohmann::json meta;
  uint64_t payload_hash = 0;
  uint64_t payload_bytes = 0;
  uint64_t payload_offset = 0;
  uint64_t file_bytes = 0;
};

Header read_header(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail(ErrorKind::Io, "cannot stat snapshot ", path);
  Header h;
  h.file_bytes = static_cast<uint64_t>(st.st_size);
  if (h.file_bytes < kPage) fail(ErrorKind::BadFormat, "snapshot ", path, " is truncated");
  uint8_t fixed[kFixed];
  read_exact(fd, fixed, kFixed, 0, path);
  if (std::memcmp(fixed, kMagic, 7) != 0) fail(ErrorKind::BadFormat, path, " is not an ingot KV snapshot");
  if (fixed[7] != kMagic[7])
    fail(ErrorKind::BadFormat, "snapshot ", path, " has format version ", static_cast<char>(fixed[7]),
         "; this build reads version ", kMagic[7]);
  uint64_t json_len = 0, header_hash = 0;
  std::memcpy(&json_len, fixed + 8, 8);
  std::memcpy(&header_hash, fixed + 16, 8);
  std::memcpy(&h.payload_hash, fixed + 24, 8);
  std::memcpy(&h.payload_bytes, fixed + 32, 8);
  if (json_len > (64u << 20) || kFixed + json_len > h.file_bytes)
    fail(ErrorKind::BadFormat, "snapshot ", path, " has a corrupt header");
  std::string js(json_len, '\0');
  read_exact(fd, js.data(), json_len, kFixed, path);
  if (header_hash_of(fixed, js) != header_hash) fail(ErrorKind::BadFormat, "snapshot ", path, " header checksum mismatch");
  try {
    h.meta = nlohmann::json::parse(js);
  } catch (const std::exception&) {
    fail(ErrorKind::BadFormat, "snapshot ", path, " has a corrupt header");
  }
  h.payload_offset = page_up(kFixed + json_len);
  if (h.payload_offset + h.payload_bytes != h.file_bytes)
    fail(ErrorKind::BadFormat, "snapshot ", path, " is truncated (", h.file_bytes, " of ",
         h.payload_offset + h.payload_bytes, " bytes)");
  return h;
}

SnapshotKey key_of(const nlohmann::json& m) {
  return {m.at("model").get<std::string>(), m.at("tokenizer").get<std::string>(), m.at("scheme").get<std::string>()};
}

// A host pool's restore: the payload is page-aligned in the file and laid out
// as slabs, so a private file mapping is the restored memory: page-cache pages,
// no copy and no fresh zeroed pages (which cost more than the read itself).
// Blocks are published, so they are only written after being freed and
// reused: those pages copy on write and the file never changes. Not
// MAP_POPULATE: write-populating a private map would copy every page. The
// checksum pass faults the pages in, one chunk per core. Reading into
// anonymous memory is the fallback.
std::shared_ptr<Storage> map_payload(int fd, const Header& h, size_t at, const std::string& path) {
  const size_t map_bytes = std::max<size_t>(at, 1);
  void* mem = ::mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, static_cast<off_t>(h.payload_offset));
  if (mem == MAP_FAILED) {
    mem = ::mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) fail(ErrorKind::ResourceExhausted, "cannot allocate ", at, " bytes to restore ", path);
    try {
      read_exact(fd, mem, at, h.payload_offset, path);
    } catch (...) {
      ::munmap(mem, map_bytes);
      throw;
    }
  }
  auto storage = Storage::adopt(mem, at, Device::CPU, [map_bytes](void* p) { ::munmap(p, map_bytes); });
  if (payload_digest(mem, at) != h.payload_hash) fail(ErrorKind::BadFormat, "snapshot ", path, " payload checksum mismatch");
  return storage;
}

// A device pool's restore: the checked mapping is uploaded into one new
// device buffer that the pool adopts as its slabs; the mapping goes after.
std::shared_ptr<Storage> upload_payload(int fd, const Header& h, size_t at, Device device, const std::string& path) {
  const std::shared_ptr<Storage> mapped = map_payload(fd, h, at, path);
  std::shared_ptr<Storage> dst = allocate_storage(std::max<size_t>(at, 1), device);
  device_copy(dst->data(), device, mapped->data(), Device::CPU, at);
  return dst;
}

}  // namespace

uint64_t write_snapshot(const std::string& path, const SequenceCache& seq, const std::vector<int32_t>& tokens,
                        const SnapshotKey& key, const SnapshotWriteHooks& hooks) {
  const Pool* pool_ptr = nullptr;
  auto layers = snapshot_layers(seq, &pool_ptr);
  const Pool& pool = *pool_ptr;
  const auto n_tokens = static_cast<int64_t>(tokens.size());
  const int64_t bs = pool.options().block_size, n_blocks = (n_tokens + bs - 1) / bs;
  if (n_tokens == 0) fail(ErrorKind::InvalidArgument, "snapshot of zero tokens");
  for (const auto& l : layers) {
    if (l.paged && l.paged->length() < n_tokens)
      fail(ErrorKind::InvalidArgument, "snapshot prefix of ", n_tokens, " tokens is longer than the cache (",
           l.paged->length(), ")");
    if (l.rot && l.rot->length() != n_tokens)
      fail(ErrorKind::InvalidArgument, "a sliding-window layer can only be snapshotted at its full length (",
           l.rot->length(), " tokens, not ", n_tokens, ")");
    if (l.lin && l.lin->tokens() != n_tokens)
      fail(ErrorKind::InvalidArgument, "a recurrent (linear-attention) layer can only be snapshotted at its full "
           "length (", l.lin->tokens(), " tokens, not ", n_tokens, ")");
  }

  // What the payload holds, in file order: memory ranges (host or the pool's
  // device) and page pads. Block addresses are read under the pool mutex (the
  // engine thread may grow the pool); the memory itself never moves.
  struct Piece {
    const void* p = nullptr;  // nullptr: pad to the next page
    size_t n = 0;
    bool on_device = false;
  };
  std::vector<Piece> plan;
  std::vector<Tensor> held;  // rotating layers' fetched rows
  auto add = [&](const void* p, size_t n, bool dev) { plan.push_back({p, n, dev}); };
  auto add_tensor = [&](const Tensor& t) {
    INGOT_CHECK(t.is_contiguous(), "snapshot of a strided tensor");
    add(t.raw(), t.nbytes(), t.device() != Device::CPU);
    plan.push_back({});
  };
  const bool dev = pool.device() != Device::CPU;
  std::vector<int64_t> kept;
  for (const auto& l : layers) {
    if (l.lin) {  // the state tensors' own memory: contiguous float32
      const Tensor& conv = l.lin->conv_state();
      const Tensor& ssm = l.lin->ssm_state();
      INGOT_CHECK(conv.dtype() == DType::F32 && ssm.dtype() == DType::F32, "linear state to snapshot must be float32");
      kept.push_back(n_tokens);
      add_tensor(conv);
      add_tensor(ssm);
      continue;
    }
    if (l.rot) {
      int64_t first = 0;
      auto [k, v] = l.rot->fetch(&first);
      kept.push_back(l.rot->length() - first);
      held.push_back(k.contiguous());
      held.push_back(v.contiguous());
      add_tensor(held[held.size() - 2]);
      add_tensor(held.back());
      continue;
    }
    // 1 when the prefix ends inside the open block whose exact rows the layer holds.
    const bool open = n_tokens % bs != 0 && l.paged->open_block() == n_blocks - 1;
    kept.push_back(open ? 1 : 0);
    const LayerPool& lp = l.paged->layer_pool();
    {
      std::lock_guard<std::mutex> lk(lp.mutex());
      for (int r = 0; r < 4; ++r) {
        const size_t bb = lp.region_block_bytes(r);
        for (int64_t b = 0; b < n_blocks && bb; ++b)
          add(lp.region(r, l.paged->block_table()[static_cast<size_t>(b)]), bb, dev);
        plan.push_back({});
      }
    }
    if (open)
      for (bool v : {false, true}) {
        add(l.paged->open_rows(v), l.paged->open_floats(v) * sizeof(float), dev);
        plan.push_back({});
      }
  }
  nlohmann::json meta = {{"model", key.model},   {"tokenizer", key.tokenizer}, {"scheme", key.scheme},
                         {"geometry", geometry(pool)}, {"tokens", tokens},       {"blocks", n_blocks},
                         {"kept", kept}};
  const std::string js = meta.dump();
  std::vector<uint8_t> head(page_up(kFixed + js.size()), 0);

  namespace fs = std::filesystem;
  static std::atomic<uint64_t> counter{0};
  const fs::path final_path(path);
  const fs::path dir = final_path.has_parent_path() ? final_path.parent_path() : fs::path(".");
  const std::string tmp =
      (dir / str_cat(".", final_path.filename().string(), ".tmp.", ::getpid(), ".", counter++)).string();
  try {
    Fd f{::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)};
    if (f.fd < 0) fail(ErrorKind::Io, "cannot create snapshot ", tmp, ": ", std::strerror(errno));
    // The payload first (its hash goes into the header), then the header page.
    PayloadWriter body(f.fd, head.size(), pool.device(), hooks, tmp);
    for (const Piece& pc : plan) {
      if (pc.p)
        body.add(pc.p, pc.n, pc.on_device);
      else
        body.pad_page();
    }
    body.flush();
    std::memcpy(head.data(), kMagic, 8);
    const uint64_t jl = js.size(), payload = body.bytes(), phash = body.digest();
    std::memcpy(head.data() + 8, &jl, 8);
    std::memcpy(head.data() + 24, &phash, 8);
    std::memcpy(head.data() + 32, &payload, 8);
    std::memcpy(head.data() + kFixed, js.data(), js.size());
    const uint64_t hh = header_hash_of(head.data(), js);
    std::memcpy(head.data() + 16, &hh, 8);
    std::vector<iovec> h{{head.data(), head.size()}};
    uint64_t at = 0;
    write_all(f.fd, h, at, hooks, tmp);
    if (::fsync(f.fd) != 0) fail(ErrorKind::Io, "fsync of snapshot ", tmp, ": ", std::strerror(errno));
    if (::rename(tmp.c_str(), path.c_str()) != 0)
      fail(ErrorKind::Io, "rename of snapshot to ", path, ": ", std::strerror(errno));
    Fd d{::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
    if (d.fd >= 0) ::fsync(d.fd);
    return body.end();
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
}

SnapshotInfo read_snapshot_info(const std::string& path) {
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) fail(ErrorKind::NotFound, "cannot open snapshot ", path, ": ", std::strerror(errno));
  Header h = read_header(f.fd, path);
  SnapshotInfo info;
  try {
    info.key = key_of(h.meta);
    info.tokens = h.meta.at("tokens").get<std::vector<int32_t>>();
  } catch (const nlohmann::json::exception&) {
    fail(ErrorKind::BadFormat, "snapshot ", path, " has a corrupt header");
  }
  info.file_bytes = h.file_bytes;
  return info;
}

std::unique_ptr<SequenceCache> restore_snapshot(const std::string& path, Pool& pool, const SnapshotKey& key,
                                                std::vector<int32_t>* tokens_out) {
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) fail(ErrorKind::NotFound, "cannot open snapshot ", path, ": ", std::strerror(errno));
  Header h = read_header(f.fd, path);
  std::vector<int32_t> tokens;
  int64_t n_blocks = 0;
  std::vector<int64_t> kept;
  try {
    if (key_of(h.meta) != key)
      fail(ErrorKind::InvalidArgument, "snapshot ", path, " belongs to another model, tokenizer or KV scheme (",
           h.meta.at("model").get<std::string>(), ", ", h.meta.at("scheme").get<std::string>(), ")");
    if (h.meta.at("geometry") != geometry(pool))
      fail(ErrorKind::InvalidArgument, "snapshot ", path, " was written with another block size, quantization or layout (",
           h.meta.at("geometry").dump(), ")");
    tokens = h.meta.at("tokens").get<std::vector<int32_t>>();
    n_blocks = h.meta.at("blocks").get<int64_t>();
    kept = h.meta.at("kept").get<std::vector<int64_t>>();
  } catch (const nlohmann::json::exception&) {
    fail(ErrorKind::BadFormat, "snapshot ", path, " has a corrupt header");
  }
  const int64_t bs = pool.options().block_size;
  if (tokens.empty() || n_blocks != (static_cast<int64_t>(tokens.size()) + bs - 1) / bs ||
      static_cast<int>(kept.size()) != pool.num_layers())
    fail(ErrorKind::BadFormat, "snapshot ", path, " has inconsistent token and block counts");
  // Expected layout, per layer, from the pool's own geometry.
  std::vector<std::array<size_t, 4>> offsets;
  std::vector<std::array<size_t, 2>> open_off(static_cast<size_t>(pool.num_layers()), {0, 0});
  size_t at = 0;
  for (int i = 0; i < pool.num_layers(); ++i) {
    const LayerPool* lp = pool.layer(i);
    std::array<size_t, 4> off{};
    const LayerSpec& spec = pool.layout()[static_cast<size_t>(i)];
    if (spec.kind == LayerKind::LinearState) {  // conv window, recurrent state
      if (kept[static_cast<size_t>(i)] != static_cast<int64_t>(tokens.size()))
        fail(ErrorKind::BadFormat, "snapshot ", path, " has an inconsistent linear-state layer");
      off[0] = at;
      at = page_up(at + conv_bytes(spec));
      off[1] = at;
      at = page_up(at + ssm_bytes(spec));
      offsets.push_back(off);
      continue;
    }
    if (!lp) {  // rotating: K rows, V rows
      const LayerSpec& s = spec;
      const int64_t n = kept[static_cast<size_t>(i)];
      if (n < 0 || n > static_cast<int64_t>(tokens.size()))
        fail(ErrorKind::BadFormat, "snapshot ", path, " has an inconsistent window layer");
      off[0] = at;
      at = page_up(at + rotating_bytes(s, pool.dtype(), n, false));
      off[1] = at;
      at = page_up(at + rotating_bytes(s, pool.dtype(), n, true));
      offsets.push_back(off);
      continue;
    }
    for (int r = 0; r < 4; ++r) {
      off[static_cast<size_t>(r)] = at;
      at = page_up(at + lp->region_block_bytes(r) * static_cast<size_t>(n_blocks));
    }
    offsets.push_back(off);
    const int64_t open = kept[static_cast<size_t>(i)];
    if (open != 0 && (open != 1 || lp->options().quant != KvQuant::Q4 || static_cast<int64_t>(tokens.size()) % bs == 0))
      fail(ErrorKind::BadFormat, "snapshot ", path, " has an inconsistent paged layer");
    if (open) {
      const auto rows = static_cast<size_t>(spec.kv_heads * bs) * sizeof(float);
      open_off[static_cast<size_t>(i)][0] = at;
      at = page_up(at + rows * static_cast<size_t>(spec.head_dim));
      open_off[static_cast<size_t>(i)][1] = at;
      at = page_up(at + rows * static_cast<size_t>(spec.v_head_dim));
    }
  }
  if (at != h.payload_bytes) fail(ErrorKind::BadFormat, "snapshot ", path, " payload size does not match its header");

  const std::shared_ptr<Storage> storage =
      pool.device() == Device::CPU ? map_payload(f.fd, h, at, path) : upload_payload(f.fd, h, at, pool.device(), path);
  const auto* mem = static_cast<const uint8_t*>(storage->data());
  auto seq = pool.new_sequence();
  for (int i = 0; i < pool.num_layers(); ++i) {
    LayerPool* lp = pool.layer(i);
    const auto& off = offsets[static_cast<size_t>(i)];
    const LayerSpec& spec = pool.layout()[static_cast<size_t>(i)];
    if (spec.kind == LayerKind::LinearState) {
      Tensor conv = Tensor::from_storage(storage, off[0], {spec.conv_kernel - 1, spec.conv_channels}, DType::F32);
      Tensor ssm = Tensor::from_storage(storage, off[1], {spec.state_heads, spec.state_k_dim, spec.state_v_dim},
                                        DType::F32);
      LinearState* st = seq->layer(i).linear_state();
      INGOT_CHECK(st, "pool layer ", i, " should hold a linear state");
      st->restore(conv, ssm, static_cast<int64_t>(tokens.size()));
      continue;
    }
    if (!lp) {
      const LayerSpec& s = pool.layout()[static_cast<size_t>(i)];
      const int64_t n = kept[static_cast<size_t>(i)];
      Tensor k = Tensor::from_storage(storage, off[0], {n, s.kv_heads, s.head_dim}, pool.dtype());
      Tensor v = Tensor::from_storage(storage, off[1], {n, s.kv_heads, s.v_head_dim}, pool.dtype());
      dynamic_cast<RotatingLayerCache&>(seq->layer(i)).adopt(k, v, static_cast<int64_t>(tokens.size()));
      continue;
    }
    const int32_t base = lp->adopt_slab(storage, off, n_blocks);
    std::vector<int32_t> table(static_cast<size_t>(n_blocks));
    for (int64_t b = 0; b < n_blocks; ++b) table[static_cast<size_t>(b)] = base + static_cast<int32_t>(b);
    const bool open = kept[static_cast<size_t>(i)] == 1;
    const auto& oo = open_off[static_cast<size_t>(i)];
    dynamic_cast<PagedLayerCache&>(seq->layer(i))
        .adopt(std::move(table), static_cast<int64_t>(tokens.size()),
               open ? reinterpret_cast<const float*>(mem + oo[0]) : nullptr,
               open ? reinterpret_cast<const float*>(mem + oo[1]) : nullptr);
  }
  if (tokens_out) *tokens_out = std::move(tokens);
  return seq;
}

std::string layout_fingerprint(const std::vector<LayerSpec>& layers, DType dtype, const std::string& identity) {
  std::string s = identity + "|" + dtype_name(dtype);
  for (const auto& l : layers) {
    s += str_cat("|", l.kv_heads, "x", l.head_dim, "x", l.v_head_dim, "w", l.window);
    if (l.kind == LayerKind::LinearState)
      s += str_cat("L", l.conv_channels, "x", l.conv_kernel, "x", l.state_heads, "x", l.state_k_dim, "x", l.state_v_dim);
  }
  return str_cat(std::hex, XXH3_64bits(s.data(), s.size()), "-", std::dec, layers.size(), "L");
}

}  // namespace ingot::kv
