#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "util/error.h"

using namespace ingot;

namespace {

std::string make_file(const std::string& header, size_t data_bytes) {
  std::string s(8, '\0');
  uint64_t n = header.size();
  std::memcpy(s.data(), &n, 8);
  s += header;
  s += std::string(data_bytes, '\x01');
  return s;
}

std::string tmp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("ingot_st_" + std::to_string(getpid()) + "_" + name)).string();
}

void write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string error_of(const std::string& bytes) {
  try {
    SafetensorsFile::parse_header(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), nullptr, nullptr);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadFormat);
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Safetensors, RoundTripThroughWriter) {
  std::string p = tmp_path("rt.safetensors");
  Tensor a = Tensor::from_f32({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = Tensor::from_i32({7, 8}, {2});
  write_safetensors(p, {{"a", a}, {"b", b}, {"c", a.to(DType::BF16)}}, {{"format", "pt"}});
  auto f = SafetensorsFile::open(p);
  EXPECT_EQ(f->tensors().size(), 3u);
  EXPECT_EQ(f->metadata().at("format"), "pt");
  EXPECT_EQ(f->get("a").to_f32_vector(), a.to_f32_vector());
  EXPECT_EQ(f->get("b").to_i32_vector(), (std::vector<int32_t>{7, 8}));
  EXPECT_EQ(f->get("c").dtype(), DType::BF16);
  EXPECT_EQ(f->get("c").to_f32_vector(), a.to_f32_vector());
  EXPECT_THROW(f->get("missing"), Error);
  std::filesystem::remove(p);
}

TEST(Safetensors, RejectsTruncatedFile) {
  EXPECT_NE(error_of("abc"), "");
  std::string ok = make_file(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8);
  EXPECT_EQ(error_of(ok), "");
  EXPECT_NE(error_of(ok.substr(0, ok.size() - 1)), "");  // data section one byte short
}

TEST(Safetensors, RejectsHeaderLengthPastEnd) {
  std::string s = make_file("{}", 0);
  uint64_t n = 1000;
  std::memcpy(s.data(), &n, 8);
  EXPECT_NE(error_of(s).find("past the end"), std::string::npos);
}

TEST(Safetensors, RejectsBadJson) {
  EXPECT_NE(error_of(make_file("{not json", 0)).find("JSON"), std::string::npos);
  EXPECT_NE(error_of(make_file("[1,2]", 0)), "");
}

TEST(Safetensors, RejectsOutOfRangeAndOverlappingOffsets) {
  EXPECT_NE(error_of(make_file(R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8)).find("outside"),
            std::string::npos);
  std::string overlap = make_file(
      R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"y":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
      12);
  EXPECT_NE(error_of(overlap).find("overlap"), std::string::npos);
  EXPECT_NE(error_of(make_file(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8)), "");
}

TEST(Safetensors, RejectsDtypeShapeMismatchAndUnknownDtype) {
  EXPECT_NE(error_of(make_file(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8)).find("need"),
            std::string::npos);
  EXPECT_NE(error_of(make_file(R"({"x":{"dtype":"F8_E9","shape":[2],"data_offsets":[0,2]}})", 2)).find("dtype"),
            std::string::npos);
  EXPECT_NE(error_of(make_file(R"({"x":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4)), "");
  EXPECT_NE(error_of(make_file(R"({"x":{"dtype":"F32"}})", 0)), "");
}

TEST(Safetensors, MissingFileIsNotFound) {
  try {
    SafetensorsFile::open("/nonexistent/model.safetensors");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::NotFound);
  }
}

TEST(Safetensors, ShardedIndex) {
  namespace fs = std::filesystem;
  fs::path dir = tmp_path("sharded");
  fs::create_directories(dir);
  write_safetensors((dir / "a.safetensors").string(), {{"w1", Tensor::from_f32({1, 2}, {2})}});
  write_safetensors((dir / "b.safetensors").string(), {{"w2", Tensor::from_f32({3}, {1})}});
  write((dir / "model.safetensors.index.json").string(),
        R"({"metadata":{},"weight_map":{"w1":"a.safetensors","w2":"b.safetensors"}})");
  auto ws = WeightStore::open_dir(dir.string());
  EXPECT_EQ(ws->get("w2").to_f32_vector(), std::vector<float>{3});
  EXPECT_EQ(ws->names().size(), 2u);
  write((dir / "model.safetensors.index.json").string(), R"({"weight_map":{"w1":"../etc/passwd"}})");
  EXPECT_THROW(WeightStore::open_dir(dir.string()), Error);
  fs::remove_all(dir);
}
