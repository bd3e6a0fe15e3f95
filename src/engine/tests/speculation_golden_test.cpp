// Speculative decoding on the goldens' real (tiny, random-weight) models:
// greedy output with verified drafts equals plain decoding token for token,
// for every family and KV kind. Drafts replay the plain output with random
// mistakes, so verifications keep everything from none to all of a draft;
// the n-gram drafter runs on prompts that repeat themselves.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "engine/draft_model_drafter.h"
#include "ingot/engine.h"
#include "models/model.h"
#include "test_drafters.h"
#include "util/error.h"

using namespace ingot;
using namespace ingot::engine;
using ingot::testing::ReplayDrafter;

namespace {

std::string golden(const std::string& name) { return std::string(INGOT_SHARED_DIR) + "/goldens/" + name; }

std::vector<int32_t> collect(const std::shared_ptr<RequestHandle>& h, Usage* usage = nullptr) {
  std::vector<int32_t> out;
  Chunk c;
  do {
    EXPECT_TRUE(h->next(&c, std::chrono::seconds(60)));
    for (auto& t : c.tokens) out.push_back(t.token);
  } while (!c.finished);
  EXPECT_NE(c.reason, FinishReason::Error) << c.error;
  if (usage) *usage = c.usage;
  return out;
}

// The golden prompt, a random one, and prompts that repeat a stretch of
// themselves (what the n-gram drafter finds).
std::vector<Request> prompts(const std::string& dir, int64_t vocab) {
  nlohmann::json g = nlohmann::json::parse(std::ifstream(dir + "/golden.json"));
  std::vector<std::vector<int32_t>> ps = {g["input_ids"].get<std::vector<int32_t>>()};
  std::mt19937 rng(7);
  auto random_ids = [&](int n) {
    std::vector<int32_t> v;
    for (int i = 0; i < n; ++i) v.push_back(static_cast<int32_t>(rng() % vocab));
    return v;
  };
  ps.push_back(random_ids(40));
  for (int rep : {2, 4}) {
    auto chunk = random_ids(12), p = random_ids(5);
    for (int i = 0; i < rep; ++i) p.insert(p.end(), chunk.begin(), chunk.end());
    ps.push_back(p);
  }
  std::vector<Request> rs;
  for (auto& p : ps) {
    Request r;
    r.prompt = p;
    r.stop.max_tokens = 28;
    r.stop.ignore_eos = true;
    r.sampling.temperature = 0;
    rs.push_back(r);
  }
  return rs;
}

void check_family(const std::string& name, const std::vector<std::string>& kinds) {
  const std::string dir = golden(name);
  ASSERT_TRUE(std::filesystem::exists(dir)) << dir;
  auto model = load_model(dir);
  ASSERT_TRUE(can_speculate(*model));
  auto rs = prompts(dir, model->vocab_size());
  for (const auto& kv : kinds) {
    SCOPED_TRACE(name + " kv " + kv);
    EngineOptions opt;
    opt.kv = kv;
    opt.prefix_cache = false;
    std::vector<std::vector<int32_t>> want;
    auto replay = std::make_shared<ReplayDrafter>(model->vocab_size(), 0.25, 3);
    {
      auto e = start_engine(*model, opt, nullptr, {});
      for (const auto& r : rs) {
        want.push_back(collect(e->submit(r)));
        std::vector<int32_t> seq = r.prompt;
        seq.insert(seq.end(), want.back().begin(), want.back().end());
        replay->add(seq);
      }
    }
    // Replayed drafts, each request alone and all together (rows of several
    // sequences, some without drafts, in one pass).
    opt.drafter = replay;
    opt.num_speculative_tokens = 6;
    {
      auto e = start_engine(*model, opt, nullptr, {});
      int64_t accepted = 0, drafted = 0;
      for (size_t i = 0; i < rs.size(); ++i) {
        Usage u;
        EXPECT_EQ(collect(e->submit(rs[i]), &u), want[i]) << "alone, prompt " << i;
        accepted += u.accepted_draft_tokens;
        drafted += u.draft_tokens;
      }
      EXPECT_GT(accepted, 20);
      EXPECT_GT(drafted, accepted);
      std::vector<std::shared_ptr<RequestHandle>> hs;
      for (size_t i = 0; i < rs.size(); ++i) {
        Request r = rs[i];
        r.speculative = i % 2 == 0;
        hs.push_back(e->submit(r));
      }
      for (size_t i = 0; i < rs.size(); ++i) EXPECT_EQ(collect(hs[i]), want[i]) << "together, prompt " << i;
    }
    // The n-gram drafter, adaptive.
    opt.drafter = nullptr;
    opt.speculative = "ngram";
    opt.num_speculative_tokens = 0;
    {
      auto e = start_engine(*model, opt, nullptr, {});
      for (size_t i = 0; i < rs.size(); ++i) EXPECT_EQ(collect(e->submit(rs[i])), want[i]) << "ngram, prompt " << i;
    }
  }
}

}  // namespace

TEST(SpeculationGolden, LlamaEveryKvKind) { check_family("llama-float32", {"contiguous", "paged", "kv8", "kv4"}); }
TEST(SpeculationGolden, LlamaBf16) { check_family("llama-bfloat16", {"contiguous", "paged"}); }
TEST(SpeculationGolden, Llama3Rope) { check_family("llama3-rope-float32", {"paged"}); }
TEST(SpeculationGolden, Qwen2) { check_family("qwen2-float32", {"paged"}); }
TEST(SpeculationGolden, Qwen3) { check_family("qwen3-float32", {"paged", "kv8"}); }
TEST(SpeculationGolden, Qwen3Moe) { check_family("qwen3_moe-float32", {"paged"}); }
// Sliding-window layers (rotating stores) and soft-capping.
TEST(SpeculationGolden, Gemma2) { check_family("gemma2-float32", {"contiguous", "paged"}); }
TEST(SpeculationGolden, Gemma3) { check_family("gemma3-bfloat16", {"paged"}); }
TEST(SpeculationGolden, Gemma4) { check_family("gemma4-float32", {"paged", "kv4"}); }

// A recurrent state cannot drop rejected tokens: such models refuse to speculate.
TEST(SpeculationGolden, RecurrentModelsRefuseClearly) {
  for (const char* name : {"qwen3_5-float32", "qwen3_next-float32"}) {
    auto model = load_model(golden(name));
    EXPECT_FALSE(can_speculate(*model)) << name;
    EngineOptions opt;
    opt.speculative = "ngram";
    try {
      start_engine(*model, opt, nullptr, {});
      ADD_FAILURE() << name << " accepted speculative decoding";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find("recurrent"), std::string::npos) << e.what();
    }
  }
}

namespace {

std::vector<int32_t> run_greedy(Model& target, const Request& r, std::shared_ptr<const Drafter> drafter,
                                const std::string& kv, Usage* usage = nullptr) {
  EngineOptions opt;
  opt.kv = kv;
  opt.drafter = std::move(drafter);
  // Adaptive lengths would not draft: these draft models cost as much as the target.
  opt.num_speculative_tokens = 4;
  auto e = start_engine(target, opt, nullptr, {});
  return collect(e->submit(r), usage);
}

}  // namespace

// A draft model (the bf16 copy, or the model itself) drafts for the float32
// model: output unchanged, and the model itself agrees with every draft.
TEST(SpeculationGolden, DraftModelKeepsTheOutput) {
  auto target = load_model(golden("llama-float32"));
  auto bf16 = load_model(golden("llama-bfloat16"));
  auto self = load_model(golden("llama-float32"));
  for (const auto& kv : {std::string("contiguous"), std::string("paged"), std::string("kv8")}) {
    SCOPED_TRACE(kv);
    for (auto& r : prompts(golden("llama-float32"), target->vocab_size())) {
      r.stop.max_tokens = 40;
      const auto want = run_greedy(*target, r, nullptr, kv);
      Usage u;
      EXPECT_EQ(run_greedy(*target, r, std::make_shared<DraftModelDrafter>(*bf16, kv), kv, &u), want);
      EXPECT_GT(u.draft_tokens, 0);
      EXPECT_EQ(run_greedy(*target, r, std::make_shared<DraftModelDrafter>(*self, kv), kv, &u), want);
      EXPECT_EQ(u.accepted_draft_tokens, u.draft_tokens);
      EXPECT_GT(u.accepted_draft_tokens, 20);
    }
  }
}

// A sequence's draft cache follows the sequence through rejections: after
// any history of proposals, its draft equals a fresh drafter's.
TEST(SpeculationGolden, DraftModelCacheFollowsRejections) {
  auto model = load_model(golden("llama-float32"));
  DraftModelDrafter drafter(*model, "paged", 8);
  auto synced = drafter.start();
  std::mt19937 rng(3);
  std::vector<int32_t> tokens = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  synced->prefill(tokens);
  for (int step = 0; step < 40; ++step) {
    const int64_t k = 1 + static_cast<int64_t>(rng() % 6);
    auto draft = synced->propose(tokens, k);
    ASSERT_EQ(static_cast<int64_t>(draft.size()), k);
    EXPECT_EQ(draft, drafter.start()->propose(tokens, k)) << "step " << step;
    // Keep a random prefix of the draft, then a token of the "target's".
    const auto keep = static_cast<std::ptrdiff_t>(rng() % (draft.size() + 1));
    tokens.insert(tokens.end(), draft.begin(), draft.begin() + keep);
    tokens.push_back(static_cast<int32_t>(rng() % model->vocab_size()));
  }
  EXPECT_THROW(DraftModelDrafter(*load_model(golden("qwen3_5-float32")), "paged"), Error);
}
