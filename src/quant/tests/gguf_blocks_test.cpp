// ingot's dequantization of every GGUF block format against the `gguf`
// package's (tests/data/quant_blocks.gguf, made by tests/tools/make_quant_fixture.py).
#include <gtest/gtest.h>

#include <vector>

#include "io/gguf.h"
#include "quant/quant.h"

using namespace ingot;

TEST(GgufBlocks, DequantizeMatchesGgufPackage) {
  auto g = GgufFile::open(std::string(INGOT_SOURCE_DIR) + "/tests/data/quant_blocks.gguf");
  int checked = 0;
  for (const char* name : {"q8_0", "q4_0", "q4_1", "q4_k", "q5_k", "q6_k"}) {
    Weight w;
    w.data = g->get(name);
    Tensor want = g->get(std::string(name) + ".expected");
    ASSERT_EQ(w.rows(), want.dim(0)) << name;
    std::vector<float> row(static_cast<size_t>(w.cols()));
    for (int64_t r = 0; r < w.rows(); ++r) {
      quant::dequantize_row(w, r, row.data());
      const float* e = want.data<float>() + r * want.dim(1);
      for (int64_t c = 0; c < w.cols(); ++c)
        ASSERT_FLOAT_EQ(row[static_cast<size_t>(c)], e[c]) << name << " row " << r << " col " << c;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 6);
}
