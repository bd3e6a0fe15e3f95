#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "util/error.h"

using namespace ingot;

namespace {

// A minimal GGUF writer for building valid and broken files in memory.
struct Builder {
  std::vector<uint8_t> b;
  template <typename T>
  void put(T v) {
    uint8_t tmp[sizeof(T)];
    std::memcpy(tmp, &v, sizeof(T));
    b.insert(b.end(), tmp, tmp + sizeof(T));
  }
  void str(const std::string& s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
  }
};

// Two tensors (f32 [2,4] and q8_0 [1,32]) plus metadata of several types.
std::vector<uint8_t> valid_file(uint64_t kv_count = 4, uint64_t n_tensors = 2, uint32_t type1 = 8,
                                uint64_t offset1 = 32) {
  Builder w;
  w.put<uint32_t>(0x46554747);
  w.put<uint32_t>(3);
  w.put<uint64_t>(n_tensors);
  w.put<uint64_t>(kv_count);
  w.str("general.architecture"); w.put<uint32_t>(8); w.str("llama");
  w.str("llama.block_count"); w.put<uint32_t>(4); w.put<uint32_t>(2);
  w.str("llama.rope.freq_base"); w.put<uint32_t>(6); w.put<float>(10000.0f);
  w.str("tokenizer.ggml.tokens"); w.put<uint32_t>(9); w.put<uint32_t>(8); w.put<uint64_t>(2); w.str("a"); w.str("b");
  w.str("t0"); w.put<uint32_t>(2); w.put<uint64_t>(4); w.put<uint64_t>(2); w.put<uint32_t>(0); w.put<uint64_t>(0);
  w.str("t1"); w.put<uint32_t>(2); w.put<uint64_t>(32); w.put<uint64_t>(1); w.put<uint32_t>(type1); w.put<uint64_t>(offset1);
  while (w.b.size() % 32) w.b.push_back(0);
  for (int i = 0; i < 8; ++i) w.put<float>(static_cast<float>(i));  // t0: 32 bytes
  for (int i = 0; i < 34; ++i) w.b.push_back(static_cast<uint8_t>(i));  // t1: one q8_0 block
  return w.b;
}

void expect_bad(const std::vector<uint8_t>& f, const std::string& needle) {
  try {
    GgufFile::parse(f.data(), f.size());
    ADD_FAILURE() << "parsed a broken file (expected '" << needle << "')";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadFormat) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(Gguf, ParsesValidFile) {
  auto f = valid_file();
  auto g = GgufFile::parse(f.data(), f.size());
  EXPECT_EQ(g->version(), 3u);
  EXPECT_EQ(g->get_string("general.architecture"), "llama");
  EXPECT_EQ(g->get_int("llama.block_count"), 2);
  EXPECT_DOUBLE_EQ(*g->get_double("llama.rope.freq_base"), 10000.0);
  EXPECT_EQ(g->find("tokenizer.ggml.tokens")->as_array("t").size(), 2u);
  ASSERT_EQ(g->tensors().size(), 2u);
  EXPECT_EQ(g->tensor_info("t0")->shape, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(g->tensor_info("t1")->dtype, DType::Q8_0);
  EXPECT_EQ(g->tensor_info("t1")->bytes, 34u);
  EXPECT_THROW(g->get_int("general.architecture"), Error);  // wrong type, clear error
}

TEST(Gguf, EveryTruncationFailsCleanly) {
  auto f = valid_file();
  for (size_t n = 0; n < f.size(); ++n) {
    std::vector<uint8_t> t(f.begin(), f.begin() + static_cast<long>(n));
    EXPECT_THROW(GgufFile::parse(t.data(), t.size()), Error) << "prefix of " << n << " bytes";
  }
}

TEST(Gguf, HostileHeaders) {
  expect_bad(valid_file(uint64_t{1} << 60), "metadata count");
  expect_bad(valid_file(4, uint64_t{1} << 61), "tensor count");
  expect_bad(valid_file(4, 2, 77), "unknown type id 77");
  expect_bad(valid_file(4, 2, 8, 31), "not aligned");
  expect_bad(valid_file(4, 2, 8, 1 << 20), "outside the data section");
  expect_bad(valid_file(4, 2, 8, 0), "overlap");
  auto f = valid_file();
  f[0] = 'X';
  expect_bad(f, "bad magic");
  f = valid_file();
  f[4] = 1;
  expect_bad(f, "version 1");
}

TEST(Gguf, HostileValues) {
  Builder w;
  w.put<uint32_t>(0x46554747); w.put<uint32_t>(3); w.put<uint64_t>(0); w.put<uint64_t>(1);
  auto base = w.b;
  w.str("x"); w.put<uint32_t>(99); w.put<uint32_t>(0);
  expect_bad(w.b, "unknown value type 99");
  w.b = base; w.str("x"); w.put<uint32_t>(9); w.put<uint32_t>(4); w.put<uint64_t>(uint64_t{1} << 62);
  expect_bad(w.b, "array elements");
  w.b = base; w.str("x"); w.put<uint32_t>(8); w.put<uint64_t>(uint64_t{1} << 40);
  expect_bad(w.b, "runs past the end");
  w.b = base; w.str("x");
  w.put<uint32_t>(9);
  for (int i = 0; i < 20; ++i) { w.put<uint32_t>(9); w.put<uint64_t>(1); }
  expect_bad(w.b, "too deep");
  w.b = base; w.str("x"); w.put<uint32_t>(7); w.put<uint8_t>(5);
  expect_bad(w.b, "bool");
}

TEST(Gguf, BadAlignmentAndDims) {
  Builder w;
  w.put<uint32_t>(0x46554747); w.put<uint32_t>(2); w.put<uint64_t>(0); w.put<uint64_t>(1);
  w.str("general.alignment"); w.put<uint32_t>(4); w.put<uint32_t>(3);
  expect_bad(w.b, "power of two");
  Builder d;
  d.put<uint32_t>(0x46554747); d.put<uint32_t>(3); d.put<uint64_t>(1); d.put<uint64_t>(0);
  d.str("t"); d.put<uint32_t>(2); d.put<uint64_t>(uint64_t{1} << 39); d.put<uint64_t>(uint64_t{1} << 39);
  d.put<uint32_t>(0); d.put<uint64_t>(0);
  for (int i = 0; i < 64; ++i) d.b.push_back(0);
  expect_bad(d.b, "bad dimension");
  Builder q;  // q4_0 row of 20 values is not a whole block
  q.put<uint32_t>(0x46554747); q.put<uint32_t>(3); q.put<uint64_t>(1); q.put<uint64_t>(0);
  q.str("t"); q.put<uint32_t>(1); q.put<uint64_t>(20); q.put<uint32_t>(2); q.put<uint64_t>(0);
  for (int i = 0; i < 64; ++i) q.b.push_back(0);
  expect_bad(q.b, "not a multiple");
}

TEST(Gguf, MissingFileIsNotFound) {
  try {
    GgufFile::open("/nonexistent/model.gguf");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::NotFound);
  }
}
