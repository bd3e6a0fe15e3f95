#include "io/safetensors.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "util/error.h"
#include "util/mapped_file.h"

namespace ingot {

using nlohmann::json;

namespace {

bool parse_st_dtype(const std::string& s, DType* out) {
  static const std::map<std::string, DType> m = {
      {"F32", DType::F32}, {"F16", DType::F16}, {"BF16", DType::BF16}, {"I32", DType::I32},
      {"I64", DType::I64}, {"U8", DType::U8},   {"I8", DType::I8},     {"U32", DType::U32},
  };
  auto it = m.find(s);
  if (it == m.end()) return false;
  *out = it->second;
  return true;
}

const char* st_dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
    case DType::U8: return "U8";
    case DType::I8: return "I8";
    case DType::U32: return "U32";
    default: fail(ErrorKind::Unsupported, "safetensors cannot store ", dtype_name(t));
  }
}

constexpr size_t kMaxHeader = size_t(100) << 20;  // same bound as the reference implementation

}  // namespace

std::vector<TensorInfo> SafetensorsFile::parse_header(const uint8_t* data, size_t size,
                                                      std::map<std::string, std::string>* metadata,
                                                      size_t* data_start) {
  if (size < 8) fail(ErrorKind::BadFormat, "safetensors: file is ", size, " bytes, too short for a header");
  uint64_t n = 0;
  std::memcpy(&n, data, 8);
  if (n > kMaxHeader) fail(ErrorKind::BadFormat, "safetensors: header length ", n, " is too large");
  if (n > size - 8)
    fail(ErrorKind::BadFormat, "safetensors: header length ", n, " runs past the end of the file (", size, " bytes)");
  json h;
  try {
    h = json::parse(data + 8, data + 8 + n);
  } catch (const std::exception& e) {
    fail(ErrorKind::BadFormat, "safetensors: header is not valid JSON: ", e.what());
  }
  if (!h.is_object()) fail(ErrorKind::BadFormat, "safetensors: header is not a JSON object");
  const size_t start = 8 + static_cast<size_t>(n);
  const size_t data_len = size - start;
  std::vector<TensorInfo> out;
  for (auto it = h.begin(); it != h.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) fail(ErrorKind::BadFormat, "safetensors: __metadata__ is not an object");
      if (metadata)
        for (auto m = it->begin(); m != it->end(); ++m)
          if (m->is_string()) (*metadata)[m.key()] = m->get<std::string>();
      continue;
    }
    const json& v = *it;
    const std::string& name = it.key();
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets") ||
        !v["dtype"].is_string() || !v["shape"].is_array() || !v["data_offsets"].is_array() ||
        v["data_offsets"].size() != 2)
      fail(ErrorKind::BadFormat, "safetensors: tensor '", name, "' has a malformed entry");
    TensorInfo ti;
    ti.name = name;
    if (!parse_st_dtype(v["dtype"].get<std::string>(), &ti.dtype))
      fail(ErrorKind::BadFormat, "safetensors: tensor '", name, "' has unsupported dtype ",
           v["dtype"].get<std::string>());
    uint64_t count = 1;
    for (const json& d : v["shape"]) {
      if (!d.is_number_unsigned()) fail(ErrorKind::BadFormat, "safetensors: tensor '", name, "' has a bad shape");
      uint64_t dim = d.get<uint64_t>();
      if (dim != 0 && count > (uint64_t(1) << 62) / dim)
        fail(ErrorKind::BadFormat, "safetensors: tensor '", name, "' shape overflows");
      count *= dim;
      ti.shape.push_back(static_cast<int64_t>(dim));
    }
    if (ti.shape.size() > static_cast<size_t>(kMaxDims))
      fail(ErrorKind::BadFormat, "safetensors: tensor '", name, "' has too many dimensions");
    for (const json& o : v["data_offsets"])
      if (!o.is_number_unsigned()) fail(ErrorKind::BadFormat, "safetensors: tensor '", name, "' has bad offsets");
    uint64_t b = v["data_offsets"][0].get<uint64_t>(), e = v["data_offsets"][1].get<uint64_t>();
    if (b > e || e > data_len)
      fail(ErrorKind::BadFormat, "safetensors: tensor '", name, "' byte range [", b, ", ", e,
           ") is outside the data section (", data_len, " bytes)");
    uint64_t want = count * dtype_size(ti.dtype);
    if (e - b != want)
      fail(ErrorKind::BadFormat, "safetensors: tensor '", name, "' has ", e - b, " bytes but its dtype and shape need ",
           want);
    ti.begin = static_cast<size_t>(b);
    ti.end = static_cast<size_t>(e);
    out.push_back(std::move(ti));
  }
  std::vector<const TensorInfo*> sorted;
  for (const auto& t : out) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < sorted.size(); ++i)
    if (sorted[i]->begin < sorted[i - 1]->end && sorted[i]->begin != sorted[i]->end &&
        sorted[i - 1]->begin != sorted[i - 1]->end)
      fail(ErrorKind::BadFormat, "safetensors: tensors '", sorted[i - 1]->name, "' and '", sorted[i]->name,
           "' overlap");
  if (data_start) *data_start = start;
  return out;
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  auto f = std::unique_ptr<SafetensorsFile>(new SafetensorsFile());
  f->file_ = MappedFile::open(path);
  try {
    f->infos_ = parse_header(f->file_->data(), f->file_->size(), &f->metadata_, &f->data_start_);
  } catch (const Error& e) {
    fail(ErrorKind::BadFormat, path, ": ", e.what());
  }
  for (size_t i = 0; i < f->infos_.size(); ++i) f->index_[f->infos_[i].name] = i;
  return f;
}

const std::string& SafetensorsFile::path() const { return file_->path(); }

Tensor SafetensorsFile::get(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) fail(ErrorKind::BadFormat, path(), ": no tensor named '", name, "'");
  const TensorInfo& ti = infos_[it->second];
  auto st = Storage::mapped(file_, data_start_ + ti.begin, ti.end - ti.begin);
  return Tensor::from_storage(st, 0, Shape(ti.shape), ti.dtype);
}

std::unique_ptr<WeightStore> WeightStore::open_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  auto ws = std::make_unique<WeightStore>();
  std::vector<std::string> files;
  fs::path index = fs::path(dir) / "model.safetensors.index.json";
  std::error_code ec;
  if (fs::exists(index, ec)) {
    json j;
    try {
      std::ifstream in(index);
      j = json::parse(in);
    } catch (const std::exception& e) {
      fail(ErrorKind::BadFormat, index.string(), ": not valid JSON: ", e.what());
    }
    if (!j.contains("weight_map") || !j["weight_map"].is_object())
      fail(ErrorKind::BadFormat, index.string(), ": missing weight_map");
    std::set<std::string> shards;
    for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
      if (!it->is_string()) fail(ErrorKind::BadFormat, index.string(), ": bad weight_map entry");
      std::string shard = it->get<std::string>();
      if (shard.find('/') != std::string::npos || shard.find("..") != std::string::npos)
        fail(ErrorKind::BadFormat, index.string(), ": shard name '", shard, "' is not a plain file name");
      shards.insert(shard);
    }
    for (const auto& s : shards) files.push_back((fs::path(dir) / s).string());
  } else if (fs::exists(fs::path(dir) / "model.safetensors", ec)) {
    files.push_back((fs::path(dir) / "model.safetensors").string());
  } else {
    if (fs::is_directory(dir, ec))
      for (const auto& e : fs::directory_iterator(dir))
        if (e.path().extension() == ".safetensors") files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
  }
  if (files.empty()) fail(ErrorKind::NotFound, dir, ": no safetensors weights found");
  for (const auto& path : files) {
    ws->files_.push_back(SafetensorsFile::open(path));
    size_t idx = ws->files_.size() - 1;
    for (const auto& ti : ws->files_.back()->tensors()) ws->where_[ti.name] = idx;
  }
  return ws;
}

Tensor WeightStore::get(const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end()) fail(ErrorKind::BadFormat, "checkpoint has no tensor named '", name, "'");
  return files_[it->second]->get(name);
}

std::vector<std::string> WeightStore::names() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : where_) out.push_back(k);
  return out;
}

size_t WeightStore::total_bytes() const {
  size_t total = 0;
  for (const auto& f : files_)
    for (const auto& t : f->tensors()) total += t.end - t.begin;
  return total;
}

void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  json h = json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  size_t off = 0;
  std::vector<Tensor> host;
  for (const auto& [name, t] : tensors) {
    Tensor c = t.to(Device::CPU).contiguous();
    h[name] = {{"dtype", st_dtype_name(c.dtype())}, {"shape", c.shape().vec()}, {"data_offsets", {off, off + c.nbytes()}}};
    off += c.nbytes();
    host.push_back(c);
  }
  std::string hs = h.dump();
  while ((8 + hs.size()) % 8) hs.push_back(' ');
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail(ErrorKind::Io, "cannot write ", tmp);
    uint64_t n = hs.size();
    out.write(reinterpret_cast<const char*>(&n), 8);
    out.write(hs.data(), static_cast<std::streamsize>(hs.size()));
    for (const Tensor& c : host) out.write(static_cast<const char*>(c.raw()), static_cast<std::streamsize>(c.nbytes()));
    out.flush();
    if (!out) fail(ErrorKind::Io, "write failed: ", tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) fail(ErrorKind::Io, "cannot rename ", tmp, " to ", path, ": ", ec.message());
}

}  // namespace ingot
