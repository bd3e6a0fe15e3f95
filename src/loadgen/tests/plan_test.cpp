// Prompt plans: exact lengths, the shared prefix, seeds, arrival times and
// the level lists users type.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "loadgen/plan.h"
#include "util/error.h"

namespace ingot::loadgen {
namespace {

TEST(Plan, PromptsHaveExactLengthsInsideTheRange) {
  PromptSpec spec;
  spec.input_len = 37;
  spec.range = {5, 9};
  auto ps = make_prompts(spec, 6, 1, 0);
  ASSERT_EQ(ps.size(), 6u);
  std::set<int32_t> seen;
  for (const auto& p : ps) {
    ASSERT_EQ(p.size(), 37u);
    for (int32_t t : p) {
      EXPECT_GE(t, 5);
      EXPECT_LT(t, 9);
      seen.insert(t);
    }
  }
  EXPECT_EQ(seen.size(), 4u);  // every id of a small range shows up
}

TEST(Plan, SharedPrefixIsCommonAndTheRestDiffers) {
  PromptSpec spec;
  spec.input_len = 16;
  spec.prefix_len = 24;
  auto a = make_prompts(spec, 3, 7, 0);
  auto b = make_prompts(spec, 3, 7, 1);  // another level: the same prefix, other prompts
  for (const auto* set : {&a, &b})
    for (const auto& p : *set) {
      ASSERT_EQ(p.size(), 40u);
      EXPECT_TRUE(std::equal(p.begin(), p.begin() + 24, a[0].begin()));
    }
  EXPECT_NE(std::vector<int32_t>(a[0].begin() + 24, a[0].end()), std::vector<int32_t>(a[1].begin() + 24, a[1].end()));
  EXPECT_NE(a[0], b[0]);
  EXPECT_EQ(make_prompts(spec, 3, 7, 0), a);  // the seed reproduces a run
  EXPECT_NE(make_prompts(spec, 3, 8, 0)[0], a[0]);
}

TEST(Plan, PrefixOnlyPromptsAreAllowed) {
  PromptSpec spec;
  spec.input_len = 0;
  spec.prefix_len = 5;
  auto ps = make_prompts(spec, 2, 1, 0);
  EXPECT_EQ(ps[0], ps[1]);
  EXPECT_EQ(ps[0].size(), 5u);
}

TEST(Plan, RejectsEmptyPromptsAndRanges) {
  PromptSpec spec;
  spec.input_len = 0;
  EXPECT_THROW(make_prompts(spec, 1, 0, 0), Error);
  spec.input_len = -1;
  spec.prefix_len = 4;
  EXPECT_THROW(make_prompts(spec, 1, 0, 0), Error);
  spec.input_len = 1;
  spec.range = {10, 10};
  EXPECT_THROW(make_prompts(spec, 1, 0, 0), Error);
}

TEST(Plan, TokenRange) {
  TokenRange r = parse_token_range("100:2000");
  EXPECT_EQ(r.lo, 100);
  EXPECT_EQ(r.hi, 2000);
  for (const char* bad : {"", "5", "5:5", "9:3", "-1:4", "a:b", "1:2:3", "1:99999999999"})
    EXPECT_THROW(parse_token_range(bad), Error) << bad;
}

TEST(Plan, PoissonArrivalsHaveTheAskedRate) {
  auto t = poisson_arrivals(4000, 50.0, 3);
  ASSERT_EQ(t.size(), 4000u);
  EXPECT_EQ(t[0], 0.0);
  for (size_t i = 1; i < t.size(); ++i) ASSERT_GE(t[i], t[i - 1]);
  EXPECT_NEAR(static_cast<double>(t.size() - 1) / t.back(), 50.0, 3.0);
  EXPECT_EQ(poisson_arrivals(10, 50.0, 3), poisson_arrivals(10, 50.0, 3));
  for (double x : poisson_arrivals(5, INFINITY, 3)) EXPECT_EQ(x, 0.0);
  EXPECT_THROW(poisson_arrivals(5, 0, 3), Error);
  EXPECT_THROW(poisson_arrivals(5, NAN, 3), Error);
}

TEST(Plan, LevelLists) {
  EXPECT_EQ(parse_positive_ints("1, 8,64", "--concurrency"), (std::vector<int64_t>{1, 8, 64}));
  for (const char* bad : {"", "0", "1,,2", "-3", "2x", "1.5"})
    EXPECT_THROW(parse_positive_ints(bad, "--concurrency"), Error) << bad;
  auto r = parse_rates("0.5,2,inf", "--request-rate");
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0], 0.5);
  EXPECT_TRUE(std::isinf(r[2]));
  for (const char* bad : {"", "0", "-1", "nan", "x", "1e999"})
    EXPECT_THROW(parse_rates(bad, "--request-rate"), Error) << bad;
}

}  // namespace
}  // namespace ingot::loadgen
