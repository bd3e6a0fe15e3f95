#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "tensor/half.h"
#include "tensor/tensor.h"
#include "util/error.h"

using namespace ingot;

TEST(Half, Bf16RoundTripAndRounding) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  // 1 + 2^-8 is exactly between two bf16 values: ties to even (down).
  EXPECT_EQ(f32_to_bf16(1.00390625f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(1.01171875f), 0x3f82);  // 1 + 3*2^-8 ties up to even
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
}

TEST(Half, F16MatchesExhaustiveRoundTrip) {
  // Every finite f16 value converts to f32 and back unchanged.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    uint16_t v = static_cast<uint16_t>(h);
    if ((v & 0x7c00) == 0x7c00) continue;  // inf/nan
    float f = f16_to_f32(v);
    ASSERT_EQ(f32_to_f16(f), v) << std::hex << h;
  }
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);  // rounds to inf
  EXPECT_EQ(f32_to_f16(5.9604645e-08f), 0x0001);  // smallest subnormal
}

TEST(Tensor, ViewsShareStorageAndCopyMaterialises) {
  std::vector<float> v(24);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  Tensor t = Tensor::from_f32(v, {2, 3, 4});
  Tensor tr = t.transpose(1, 2);  // [2, 4, 3]
  EXPECT_FALSE(tr.is_contiguous());
  EXPECT_EQ(tr.item_f32({1, 2, 1}), t.item_f32({1, 1, 2}));
  Tensor c = tr.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.item_f32({1, 3, 2}), 23.0f);
  Tensor s = t.slice(1, 1, 3);
  EXPECT_EQ(s.shape(), Shape({2, 2, 4}));
  EXPECT_EQ(s.item_f32({0, 0, 0}), 4.0f);
  Tensor sel = t.select(0, 1);
  EXPECT_EQ(sel.shape(), Shape({3, 4}));
  EXPECT_EQ(sel.item_f32({2, 3}), 23.0f);
  Tensor r = t.reshape({6, -1});
  EXPECT_EQ(r.shape(), Shape({6, 4}));
  EXPECT_EQ(r.storage(), t.storage());
  Tensor rt = tr.reshape({-1});  // non-contiguous reshape copies
  EXPECT_EQ(rt.to_f32_vector()[1], 4.0f);
  Tensor u = t.unsqueeze(0);
  EXPECT_EQ(u.shape(), Shape({1, 2, 3, 4}));
}

TEST(Tensor, DtypeConversion) {
  Tensor t = Tensor::from_f32({1.5f, -2.25f, 3.0f}, {3});
  Tensor b = t.to(DType::BF16);
  EXPECT_EQ(b.dtype(), DType::BF16);
  EXPECT_EQ(b.to(DType::F32).to_f32_vector(), (std::vector<float>{1.5f, -2.25f, 3.0f}));
  EXPECT_EQ(dtype_bytes(DType::Q4_0, 64), 36u);
  EXPECT_THROW(parse_dtype("float8"), Error);
}

TEST(Tensor, BadSliceIsAnError) {
  Tensor t = Tensor::zeros({2, 3}, DType::F32);
  EXPECT_THROW(t.slice(1, 2, 5), Error);
  EXPECT_THROW(t.reshape({4, 2}), Error);
}
