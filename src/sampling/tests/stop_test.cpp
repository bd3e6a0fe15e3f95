#include <gtest/gtest.h>

#include "sampling/stop.h"

using namespace ingot;
using namespace ingot::sampling;

namespace {
// Token i decodes to pieces[i]; token 0 is a special token with text "<eos>".
class PieceDecoder final : public engine::TextDecoder {
 public:
  explicit PieceDecoder(std::vector<std::string> pieces) : pieces_(std::move(pieces)) {}
  class S final : public Stream {
   public:
    S(const PieceDecoder* d, bool skip) : d_(d), skip_(skip) {}
    std::string push(int32_t t) override { return t == 0 && skip_ ? "" : d_->pieces_[static_cast<size_t>(t)]; }
    std::string flush() override { return ""; }
    const PieceDecoder* d_;
    bool skip_;
  };
  std::unique_ptr<Stream> stream(bool skip) const override { return std::make_unique<S>(this, skip); }
  std::vector<std::string> pieces_;
};

struct FeedResult {
  std::string text;
  StopResult last;
  int tokens = 0;
};

FeedResult feed(StopChecker& c, const std::vector<int32_t>& toks) {
  FeedResult r;
  for (int32_t t : toks) {
    ++r.tokens;
    r.last = c.push(t, r.tokens);
    r.text += r.last.text;
    if (r.last.finished) break;
  }
  return r;
}
}  // namespace

TEST(Stop, StopStringAcrossTokenBoundariesIsHeldBackAndCut) {
  PieceDecoder d({"<eos>", "Hel", "lo", " wo", "rld", "EN", "D", "!"});
  engine::StopParams p;
  p.stop_strings = {"END"};
  StopChecker c(p, {0}, &d);
  // "Hello world" then "EN" (held back: prefix of END) then "D" completes it.
  std::vector<std::string> released;
  std::vector<int32_t> toks = {1, 2, 3, 4, 5, 6, 7};
  FeedResult r;
  for (size_t i = 0; i < toks.size(); ++i) {
    auto s = c.push(toks[i], static_cast<int64_t>(i + 1));
    released.push_back(s.text);
    r.text += s.text;
    if (s.finished) {
      r.last = s;
      break;
    }
  }
  EXPECT_EQ(r.text, "Hello world");
  EXPECT_EQ(released[4], "");  // "EN" held back
  EXPECT_TRUE(r.last.finished);
  EXPECT_EQ(r.last.reason, engine::FinishReason::Stop);
  EXPECT_EQ(r.last.matched, "END");
}

TEST(Stop, HeldBackTextIsReleasedWhenItStopsMatching) {
  PieceDecoder d({"<eos>", "a", "E", "N", "x"});
  engine::StopParams p;
  p.stop_strings = {"END"};
  StopChecker c(p, {0}, &d);
  EXPECT_EQ(c.push(1, 1).text, "a");
  EXPECT_EQ(c.push(2, 2).text, "");
  EXPECT_EQ(c.push(3, 3).text, "");
  EXPECT_EQ(c.push(4, 4).text, "ENx");
}

TEST(Stop, IncludeStopStrKeepsIt) {
  PieceDecoder d({"<eos>", "ab", "cd"});
  engine::StopParams p;
  p.stop_strings = {"bc"};
  p.include_stop_str = true;
  StopChecker c(p, {0}, &d);
  auto r = feed(c, {1, 2});
  EXPECT_EQ(r.text, "abc");
  EXPECT_EQ(r.last.matched, "bc");
}

TEST(Stop, EosStopIdsMaxTokens) {
  PieceDecoder d({"<eos>", "x", "y"});
  engine::StopParams p;
  p.max_tokens = 3;
  {
    StopChecker c(p, {0}, &d);
    auto r = feed(c, {1, 0, 1});
    EXPECT_EQ(r.tokens, 2);
    EXPECT_EQ(r.last.reason, engine::FinishReason::Stop);
    EXPECT_EQ(r.last.matched, "<eos>");
    EXPECT_EQ(r.text, "x");
  }
  {
    engine::StopParams q = p;
    q.ignore_eos = true;
    StopChecker c(q, {0}, &d);
    auto r = feed(c, {1, 0, 1, 1});
    EXPECT_EQ(r.tokens, 3);
    EXPECT_EQ(r.last.reason, engine::FinishReason::Length);
  }
  {
    engine::StopParams q = p;
    q.stop_token_ids = {2};
    StopChecker c(q, {}, &d);
    auto r = feed(c, {1, 2});
    EXPECT_EQ(r.last.reason, engine::FinishReason::Stop);
    EXPECT_EQ(r.last.matched, "y");
  }
}
