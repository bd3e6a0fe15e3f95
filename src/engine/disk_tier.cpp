// The prefix cache's disk tier: every prefix published in RAM is written
// behind to a snapshot file (kv/snapshot_store.h) by the store's writer
// thread, so a prefix survives its eviction from RAM and a restart; a prompt
// that extends a prefix on disk (longer than any RAM hit) restores it into
// the pool (a file mapping adopted as a slab, whole blocks) and publishes it
// in RAM, and only the rest is prefilled. Hybrid models' snapshots carry
// each linear layer's conv window and recurrent state at the prefix's end.
//
// Snapshots live in a folder per key under the cache folder: the key is the
// weights' and tokenizer's fingerprints, the KV layout and the pool's scheme,
// so models never read, count or evict each other's files.
#include <chrono>
#include <cstdio>
#include <filesystem>

#include <xxhash.h>

#include <nlohmann/json.hpp>

#include "engine/engine_impl.h"
#include "kv/kinds.h"
#include "kv/snapshot.h"
#include "util/error.h"
#include "util/log.h"
#include "util/strings.h"

namespace ingot::engine {

namespace fs = std::filesystem;

namespace {

// Why this engine cannot keep prefixes on disk, or "" when it can.
std::string disk_tier_refusal(const std::vector<kv::LayerSpec>& layout, const kv::Pool* pool, bool prefix_cache) {
  if (!prefix_cache) return "the prefix cache is off";
  if (!pool) return "it needs a paged KV cache (--kv paged, kv8 or kv4)";
  // A window layer keeps only its last rows, which a fork of a shorter prefix
  // cannot trim back to. (Recurrent layers are fine: their prefixes are
  // published and found at exactly their length, never trimmed.)
  for (const auto& l : layout)
    if (l.window > 0) return "the model has sliding-window layers";
  return "";
}

}  // namespace

void EngineImpl::open_disk_tier() {
  if (opt_.disk_cache_dir.empty()) return;
  if (opt_.disk_cache_gb <= 0) fail(ErrorKind::InvalidArgument, "the disk cache bound must be > 0 GB");
  const std::string why = disk_tier_refusal(layout_, pool_.get(), prefix_.has_value());
  if (!why.empty()) {
    log::info("prompt cache: no disk tier (", why, ")");
    return;
  }
  kv::SnapshotKey key{kv::layout_fingerprint(layout_, kv_dtype_, opt_.disk_cache_model), opt_.disk_cache_tokenizer,
                      pool_->scheme()};
  const std::string id = key.model + "|" + key.tokenizer + "|" + key.scheme;
  const fs::path dir = fs::path(opt_.disk_cache_dir) / str_cat(std::hex, XXH3_64bits(id.data(), id.size()));
  const auto bound = static_cast<uint64_t>(opt_.disk_cache_gb * 1e9);
  try {
    disk_ = std::make_unique<kv::SnapshotStore>(dir.string(), key, bound, 4, /*exclusive=*/true);
    // What `ingot cache ls` shows for the folder.
    nlohmann::json about = {{"model", opt_.disk_cache_label},
                            {"key", {{"model", key.model}, {"tokenizer", key.tokenizer}, {"scheme", key.scheme}}}};
    write_text_file_atomic((dir / "model.json").string(), about.dump(2) + "\n");
  } catch (const std::exception& e) {  // ours, or the filesystem library's
    // A cache that cannot be kept is no reason not to serve.
    log::warn("prompt cache: no disk tier: ", e.what());
    disk_.reset();
    return;
  }
  log::info("prompt cache: disk tier at ", dir.string(), " (", disk_->size(), " snapshots, ",
            disk_->disk_bytes() >> 20, " MiB, bound ", opt_.disk_cache_gb, " GB)");
}

void EngineImpl::restore_from_disk(Sequence& s, PrefixCache::Hit& hit) {
  std::vector<int32_t> head(s.tokens.begin(), s.tokens.begin() + (s.prompt_len - 1));
  const int64_t block = prefix_->block_tokens();
  // A paged prefix is trimmed to the whole blocks it shares with the prompt;
  // a recurrent state only serves a prompt it prefixes entirely.
  auto match = disk_->best_match(head, prefix_->exact() ? 0 : block);
  if (!match) return;
  const kv::SnapshotStore::Entry* e = &match->entry;
  const int64_t n = match->tokens;
  if (n <= hit.tokens || n % block != 0) return;
  std::unique_ptr<kv::SequenceCache> restored;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    restored = disk_->restore(*e, *pool_);
  } catch (const Error& err) {
    log::warn("prompt cache: restore failed: ", err.what());
    return;
  }
  if (!restored) return;  // refused or gone: the store logged and counted it
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  char took[32];
  std::snprintf(took, sizeof took, "%.1f ms", ms);
  log::info("prompt cache: restored ", n, " of ", e->tokens.size(), " tokens (", e->bytes, " bytes) from disk in ", took);
  if (!publish_entry(e->tokens, n, *restored)) return;
  s.disk_restored = n;
  hit = prefix_->lookup(s.tokens, s.prompt_len - 1);
}

void EngineImpl::write_behind(const Sequence& s, int64_t full, const kv::SequenceCache& entry) {
  std::vector<int32_t> prefix(s.tokens.begin(), s.tokens.begin() + full);
  if (disk_->has(prefix)) return;  // restored from disk, or written before
  kv::SnapshotStore::Clock::time_point pin{};
  if (s.req.cache_pin_seconds > 0)
    pin = kv::SnapshotStore::Clock::now() + std::chrono::seconds(s.req.cache_pin_seconds);
  disk_->submit(entry.clone(), std::move(prefix), pin);
}

void EngineImpl::disk_stats(Stats& st) const {
  st.disk_cache = disk_ != nullptr;
  if (!disk_) return;
  const kv::SnapshotStore::Stats ds = disk_->stats();
  st.disk_cache_files = static_cast<int64_t>(disk_->size());
  st.disk_cache_bytes = static_cast<int64_t>(disk_->disk_bytes());
  st.disk_cache_writes = ds.written;
  st.disk_cache_dropped = ds.dropped;
  st.disk_cache_failed = ds.failed;
  st.disk_cache_evictions = ds.evicted;
  st.disk_cache_refused = ds.refused;
}

}  // namespace ingot::engine
