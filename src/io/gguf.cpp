#include "io/gguf.h"

#include <algorithm>
#include <cstring>

#include "util/error.h"
#include "util/mapped_file.h"

namespace ingot {

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr int kMaxArrayDepth = 8;
constexpr int kMaxGgufDims = 4;  // ggml's limit

struct GgmlTypeInfo {
  uint32_t id;
  const char* name;
  int block_elems;
  int block_bytes;
  std::optional<DType> dtype;
};

// Only types whose block layout is known: anything else is rejected up front,
// since its byte size (and so the layout check) cannot be trusted.
const GgmlTypeInfo* ggml_type(uint32_t id) {
  static const GgmlTypeInfo table[] = {
      {0, "f32", 1, 4, DType::F32},         {1, "f16", 1, 2, DType::F16},
      {2, "q4_0", 32, 18, DType::Q4_0},     {3, "q4_1", 32, 20, DType::Q4_1},
      {6, "q5_0", 32, 22, std::nullopt},    {7, "q5_1", 32, 24, std::nullopt},
      {8, "q8_0", 32, 34, DType::Q8_0},     {9, "q8_1", 32, 36, std::nullopt},
      {10, "q2_k", 256, 84, std::nullopt},  {11, "q3_k", 256, 110, std::nullopt},
      {12, "q4_k", 256, 144, DType::Q4_K},  {13, "q5_k", 256, 176, DType::Q5_K},
      {14, "q6_k", 256, 210, DType::Q6_K},  {15, "q8_k", 256, 292, std::nullopt},
      {20, "iq4_nl", 32, 18, std::nullopt}, {23, "iq4_xs", 256, 136, std::nullopt},
      {24, "i8", 1, 1, DType::I8},          {25, "i16", 1, 2, std::nullopt},
      {26, "i32", 1, 4, DType::I32},        {27, "i64", 1, 8, DType::I64},
      {28, "f64", 1, 8, std::nullopt},      {30, "bf16", 1, 2, DType::BF16},
  };
  for (const auto& t : table)
    if (t.id == id) return &t;
  return nullptr;
}

const char* value_type_name(GgufType t) {
  static const char* names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
                                "bool", "string", "array", "u64", "i64", "f64"};
  auto i = static_cast<uint32_t>(t);
  return i < 13 ? names[i] : "?";
}

// Bounds-checked little-endian reader over the file bytes.
class Reader {
 public:
  Reader(const uint8_t* d, size_t n) : d_(d), n_(n) {}
  size_t pos() const { return pos_; }
  size_t left() const { return n_ - pos_; }

  void need(size_t bytes, const char* what) const {
    if (bytes > left())
      fail(ErrorKind::BadFormat, "gguf: file truncated while reading ", what, " at byte ", pos_, " (need ",
           bytes, ", ", left(), " left)");
  }
  template <typename T>
  T get(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, d_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string str(const char* what) {
    uint64_t len = get<uint64_t>(what);
    if (len > left())
      fail(ErrorKind::BadFormat, "gguf: ", what, " length ", len, " runs past the end of the file");
    std::string s(reinterpret_cast<const char*>(d_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return s;
  }

 private:
  const uint8_t* d_;
  size_t n_;
  size_t pos_ = 0;
};

// Smallest encoding of one value of `t` (bounds array counts before allocating).
size_t min_value_bytes(GgufType t) {
  switch (t) {
    case GgufType::U8: case GgufType::I8: case GgufType::BOOL: return 1;
    case GgufType::U16: case GgufType::I16: return 2;
    case GgufType::U32: case GgufType::I32: case GgufType::F32: return 4;
    case GgufType::U64: case GgufType::I64: case GgufType::F64: case GgufType::STRING: return 8;
    case GgufType::ARRAY: return 12;
  }
  return 1;
}

GgufType check_type(uint32_t raw, const std::string& key) {
  if (raw > static_cast<uint32_t>(GgufType::F64))
    fail(ErrorKind::BadFormat, "gguf: metadata '", key, "' has unknown value type ", raw);
  return static_cast<GgufType>(raw);
}

GgufValue read_value(Reader& r, GgufType t, const std::string& key, int depth) {
  GgufValue v;
  v.type = t;
  switch (t) {
    case GgufType::U8: v.v = uint64_t{r.get<uint8_t>("a u8 value")}; break;
    case GgufType::I8: v.v = int64_t{r.get<int8_t>("an i8 value")}; break;
    case GgufType::U16: v.v = uint64_t{r.get<uint16_t>("a u16 value")}; break;
    case GgufType::I16: v.v = int64_t{r.get<int16_t>("an i16 value")}; break;
    case GgufType::U32: v.v = uint64_t{r.get<uint32_t>("a u32 value")}; break;
    case GgufType::I32: v.v = int64_t{r.get<int32_t>("an i32 value")}; break;
    case GgufType::U64: v.v = r.get<uint64_t>("a u64 value"); break;
    case GgufType::I64: v.v = r.get<int64_t>("an i64 value"); break;
    case GgufType::F32: v.v = double{r.get<float>("an f32 value")}; break;
    case GgufType::F64: v.v = r.get<double>("an f64 value"); break;
    case GgufType::BOOL: {
      uint8_t b = r.get<uint8_t>("a bool value");
      if (b > 1) fail(ErrorKind::BadFormat, "gguf: metadata '", key, "' has bool value ", int{b});
      v.v = b != 0;
      break;
    }
    case GgufType::STRING: v.v = r.str("a string value"); break;
    case GgufType::ARRAY: {
      if (depth >= kMaxArrayDepth) fail(ErrorKind::BadFormat, "gguf: metadata '", key, "' nests arrays too deep");
      v.elem_type = check_type(r.get<uint32_t>("an array type"), key);
      uint64_t count = r.get<uint64_t>("an array length");
      if (count > r.left() / min_value_bytes(v.elem_type))
        fail(ErrorKind::BadFormat, "gguf: metadata '", key, "' claims ", count, " array elements, more than the file holds");
      auto arr = std::make_shared<GgufArray>();
      arr->reserve(static_cast<size_t>(count));
      for (uint64_t i = 0; i < count; ++i) arr->push_back(read_value(r, v.elem_type, key, depth + 1));
      v.v = std::move(arr);
      break;
    }
  }
  return v;
}

}  // namespace

bool GgufValue::is_int() const {
  switch (type) {
    case GgufType::U8: case GgufType::I8: case GgufType::U16: case GgufType::I16: case GgufType::U32:
    case GgufType::I32: case GgufType::U64: case GgufType::I64: return true;
    default: return false;
  }
}

int64_t GgufValue::as_int(const std::string& what) const {
  if (const auto* u = std::get_if<uint64_t>(&v)) {
    if (*u > static_cast<uint64_t>(INT64_MAX)) fail(ErrorKind::BadFormat, "gguf: ", what, " is out of range");
    return static_cast<int64_t>(*u);
  }
  if (const auto* i = std::get_if<int64_t>(&v)) return *i;
  if (const auto* b = std::get_if<bool>(&v)) return *b ? 1 : 0;
  fail(ErrorKind::BadFormat, "gguf: ", what, " should be an integer, found ", value_type_name(type));
}

double GgufValue::as_double(const std::string& what) const {
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (is_int()) return static_cast<double>(as_int(what));
  fail(ErrorKind::BadFormat, "gguf: ", what, " should be a number, found ", value_type_name(type));
}

bool GgufValue::as_bool(const std::string& what) const {
  if (const auto* b = std::get_if<bool>(&v)) return *b;
  if (is_int()) return as_int(what) != 0;
  fail(ErrorKind::BadFormat, "gguf: ", what, " should be a bool, found ", value_type_name(type));
}

const std::string& GgufValue::as_string(const std::string& what) const {
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  fail(ErrorKind::BadFormat, "gguf: ", what, " should be a string, found ", value_type_name(type));
}

const GgufArray& GgufValue::as_array(const std::string& what) const {
  if (const auto* a = std::get_if<std::shared_ptr<GgufArray>>(&v)) return **a;
  fail(ErrorKind::BadFormat, "gguf: ", what, " should be an array, found ", value_type_name(type));
}

std::optional<DType> dtype_from_ggml(uint32_t id) {
  const GgmlTypeInfo* t = ggml_type(id);
  return t ? t->dtype : std::nullopt;
}

std::string ggml_type_name(uint32_t id) {
  const GgmlTypeInfo* t = ggml_type(id);
  return t ? t->name : str_cat("type ", id);
}

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path) {
  auto file = MappedFile::open(path);
  try {
    return parse(file->data(), file->size(), file);
  } catch (const Error& e) {
    fail(e.kind(), path, ": ", e.what());
  }
}

std::unique_ptr<GgufFile> GgufFile::parse(const uint8_t* data, size_t size, std::shared_ptr<MappedFile> file) {
  auto g = std::unique_ptr<GgufFile>(new GgufFile());
  g->file_ = std::move(file);
  Reader r(data, size);
  if (r.get<uint32_t>("the magic") != kMagic) fail(ErrorKind::BadFormat, "gguf: not a GGUF file (bad magic)");
  g->version_ = r.get<uint32_t>("the version");
  if (g->version_ != 2 && g->version_ != 3)
    fail(ErrorKind::BadFormat, "gguf: version ", g->version_, " is not supported (only 2 and 3)");
  uint64_t n_tensors = r.get<uint64_t>("the tensor count");
  uint64_t n_kv = r.get<uint64_t>("the metadata count");
  // Each entry needs at least its minimal encoding: reject counts the file cannot hold.
  if (n_kv > r.left() / 13) fail(ErrorKind::BadFormat, "gguf: metadata count ", n_kv, " exceeds what the file can hold");
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = r.str("a metadata key");
    GgufType t = check_type(r.get<uint32_t>("a metadata type"), key);
    GgufValue v = read_value(r, t, key, 0);
    if (!g->kv_.emplace(key, std::move(v)).second) fail(ErrorKind::BadFormat, "gguf: duplicate metadata key '", key, "'");
  }
  if (n_tensors > r.left() / 24)
    fail(ErrorKind::BadFormat, "gguf: tensor count ", n_tensors, " exceeds what the file can hold");
  if (auto a = g->get_int("general.alignment")) {
    if (*a <= 0 || *a > (1 << 20) || (*a & (*a - 1)) != 0)
      fail(ErrorKind::BadFormat, "gguf: general.alignment ", *a, " is not a power of two");
    g->alignment_ = static_cast<size_t>(*a);
  }
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo ti;
    ti.name = r.str("a tensor name");
    uint32_t nd = r.get<uint32_t>("tensor dimensions");
    if (nd == 0 || nd > kMaxGgufDims) fail(ErrorKind::BadFormat, "gguf: tensor '", ti.name, "' has ", nd, " dimensions");
    std::vector<int64_t> ne(nd);
    uint64_t numel = 1;
    for (uint32_t d = 0; d < nd; ++d) {
      uint64_t x = r.get<uint64_t>("a tensor dimension");
      if (x == 0 || x > (uint64_t{1} << 40) || numel > (uint64_t{1} << 62) / x)
        fail(ErrorKind::BadFormat, "gguf: tensor '", ti.name, "' has a bad dimension ", x);
      ne[d] = static_cast<int64_t>(x);
      numel *= x;
    }
    ti.ggml_type = r.get<uint32_t>("a tensor type");
    const GgmlTypeInfo* tt = ggml_type(ti.ggml_type);
    if (!tt) fail(ErrorKind::BadFormat, "gguf: tensor '", ti.name, "' has unknown type id ", ti.ggml_type);
    if (ne[0] % tt->block_elems != 0)
      fail(ErrorKind::BadFormat, "gguf: tensor '", ti.name, "' row of ", ne[0], " is not a multiple of the ", tt->name,
           " block (", tt->block_elems, ")");
    ti.offset = r.get<uint64_t>("a tensor offset");
    ti.bytes = numel / static_cast<uint64_t>(tt->block_elems) * static_cast<uint64_t>(tt->block_bytes);
    ti.shape.assign(ne.rbegin(), ne.rend());
    ti.dtype = tt->dtype.value_or(DType::U8);
    if (g->index_.count(ti.name)) fail(ErrorKind::BadFormat, "gguf: duplicate tensor '", ti.name, "'");
    g->index_[ti.name] = g->infos_.size();
    g->infos_.push_back(std::move(ti));
  }
  size_t start = (r.pos() + g->alignment_ - 1) / g->alignment_ * g->alignment_;
  if (start > size && !g->infos_.empty()) fail(ErrorKind::BadFormat, "gguf: data section starts past the end of the file");
  g->data_offset_ = start;
  const uint64_t data_len = size > start ? size - start : 0;
  std::vector<const GgufTensorInfo*> by_offset;
  for (const auto& ti : g->infos_) {
    if (ti.offset % g->alignment_ != 0)
      fail(ErrorKind::BadFormat, "gguf: tensor '", ti.name, "' offset ", ti.offset, " is not aligned to ", g->alignment_);
    if (ti.offset > data_len || ti.bytes > data_len - ti.offset)
      fail(ErrorKind::BadFormat, "gguf: tensor '", ti.name, "' (", ti.bytes, " bytes at ", ti.offset,
           ") lies outside the data section (", data_len, " bytes): file truncated or corrupt");
    by_offset.push_back(&ti);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i - 1]->offset + by_offset[i - 1]->bytes > by_offset[i]->offset)
      fail(ErrorKind::BadFormat, "gguf: tensors '", by_offset[i - 1]->name, "' and '", by_offset[i]->name, "' overlap");
  return g;
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

std::optional<int64_t> GgufFile::get_int(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  return v->as_int(key);
}
std::optional<double> GgufFile::get_double(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  return v->as_double(key);
}
std::optional<bool> GgufFile::get_bool(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  return v->as_bool(key);
}
std::optional<std::string> GgufFile::get_string(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  return v->as_string(key);
}

const GgufTensorInfo* GgufFile::tensor_info(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &infos_[it->second];
}

Tensor GgufFile::get(const std::string& name) const {
  const GgufTensorInfo* ti = tensor_info(name);
  if (!ti) fail(ErrorKind::BadFormat, "gguf: no tensor named '", name, "'");
  if (!dtype_from_ggml(ti->ggml_type))
    fail(ErrorKind::Unsupported, "gguf: tensor '", name, "' has type ", ggml_type_name(ti->ggml_type),
         ", which ingot cannot run yet");
  if (!file_) fail(ErrorKind::Internal, "gguf: tensor data requested from a header-only parse");
  auto storage = Storage::mapped(file_, data_offset_ + ti->offset, ti->bytes);
  return Tensor::from_storage(storage, 0, Shape(ti->shape), ti->dtype);
}

const std::string& GgufFile::path() const {
  static const std::string none = "<memory>";
  return file_ ? file_->path() : none;
}

size_t GgufFile::total_bytes() const {
  size_t s = 0;
  for (const auto& t : infos_) s += t.bytes;
  return s;
}

}  // namespace ingot
