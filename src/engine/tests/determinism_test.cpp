#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "ingot/engine.h"
#include "models/model.h"
#include "sampling/tests/row_cases.h"
#include "util/error.h"

using namespace ingot;
using namespace ingot::engine;

namespace {

const std::string kGolden = std::string(INGOT_SHARED_DIR) + "/goldens/llama-float32";

std::vector<int32_t> collect(const std::shared_ptr<RequestHandle>& h) {
  std::vector<int32_t> out;
  Chunk c;
  do {
    EXPECT_TRUE(h->next(&c, std::chrono::seconds(60)));
    for (auto& t : c.tokens) out.push_back(t.token);
  } while (!c.finished);
  EXPECT_NE(c.reason, FinishReason::Error) << c.error;
  return out;
}

std::vector<Request> requests(int64_t vocab) {
  std::mt19937 g(123);
  std::vector<Request> rs;
  for (int i = 0; i < 16; ++i) {
    Request r;
    const int len = 3 + i * 11;  // 3 .. 168 tokens
    for (int j = 0; j < len; ++j) r.prompt.push_back(static_cast<int32_t>(g() % vocab));
    r.stop.max_tokens = 6 + i % 5;
    r.stop.ignore_eos = true;
    if (i % 2) {
      r.sampling.temperature = 0.8f;
      r.sampling.top_p = 0.95f;
      r.sampling.top_k = i % 3 ? 40 : 0;
      r.sampling.seed = 1000 + i;
    } else {
      r.sampling.temperature = 0;
    }
    rs.push_back(r);
  }
  return rs;
}

}  // namespace

TEST(Determinism, GoldenGreedyThroughTheEngine) {
  ASSERT_TRUE(std::filesystem::exists(kGolden)) << kGolden;
  auto model = load_model(kGolden);
  nlohmann::json g = nlohmann::json::parse(std::ifstream(kGolden + "/golden.json"));
  Request r;
  r.prompt = g["input_ids"].get<std::vector<int32_t>>();
  auto want = g["greedy_ids"].get<std::vector<int32_t>>();
  r.stop.max_tokens = static_cast<int64_t>(want.size());
  r.stop.ignore_eos = true;
  r.sampling.temperature = 0;
  EngineOptions opt;
  opt.kv = "contiguous";
  auto e = start_engine(*model, opt, nullptr, model->config().eos_token_ids);
  EXPECT_EQ(collect(e->submit(r)), want);
}

TEST(Determinism, SameTokensAloneAndInsideSixteenConcurrentRequests) {
  ASSERT_TRUE(std::filesystem::exists(kGolden)) << kGolden;
  auto model = load_model(kGolden);
  auto rs = requests(model->vocab_size());
  EngineOptions opt;
  opt.kv = "contiguous";
  opt.prefill_chunk = 32;  // several chunks per long prompt, mixed with decode rows
  opt.prefix_cache = false;
  std::vector<std::vector<int32_t>> alone;
  {
    auto e = start_engine(*model, opt, nullptr, {});
    for (const auto& r : rs) alone.push_back(collect(e->submit(r)));
  }
  auto e = start_engine(*model, opt, nullptr, {});
  std::vector<std::shared_ptr<RequestHandle>> hs;
  for (const auto& r : rs) hs.push_back(e->submit(r));
  for (size_t i = 0; i < rs.size(); ++i) {
    auto got = collect(hs[i]);
    EXPECT_EQ(got, alone[i]) << "request " << i << (i % 2 ? " (sampled)" : " (greedy)");
    EXPECT_EQ(static_cast<int64_t>(got.size()), rs[i].stop.max_tokens);
  }
  // A different seed changes a sampled request.
  Request r = rs[1];
  r.sampling.seed = 99999;
  EXPECT_NE(collect(e->submit(r)), alone[1]);
}

namespace {

struct Picked {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::vector<int32_t> alternatives;
};

Picked collect_picks(const std::shared_ptr<RequestHandle>& h) {
  Picked p;
  Chunk c;
  do {
    EXPECT_TRUE(h->next(&c, std::chrono::seconds(60)));
    for (auto& t : c.tokens) {
      p.tokens.push_back(t.token);
      p.logprobs.push_back(t.logprob);
      for (auto& a : t.top) p.alternatives.push_back(a.token);
    }
  } while (!c.finished);
  EXPECT_NE(c.reason, FinishReason::Error) << c.error;
  return p;
}

// Submits every request to a fresh engine at once and gathers each one's
// output with `collect`; `st`, when given, gets the engine's stats after.
template <class Collect>
auto run_engine(Model& m, const EngineOptions& opt, const std::vector<Request>& rs, Collect collect,
                Stats* st = nullptr) {
  auto e = start_engine(m, opt, nullptr, {});
  std::vector<std::shared_ptr<RequestHandle>> hs;
  for (const auto& r : rs) hs.push_back(e->submit(r));
  std::vector<decltype(collect(hs.front()))> out;
  for (auto& h : hs) out.push_back(collect(h));
  if (st) *st = e->stats();
  return out;
}

}  // namespace

// The batched row sampler (its host twin here) picks what the per-sequence
// host sampler picks, for every sampling setting, rows it does not cover
// (top-p alone) included, all requests running together.
TEST(Determinism, BatchedRowSamplerEqualsHostSampling) {
  ASSERT_TRUE(std::filesystem::exists(kGolden)) << kGolden;
  auto model = load_model(kGolden);
  auto rs = requests(model->vocab_size());
  const auto cases = ingot::sampling::testing::row_cases();
  for (size_t i = 0; i < cases.size(); ++i) {
    Request r = rs[i % rs.size()];
    r.sampling = cases[i];
    r.sampling.seed = 77 + i;
    rs.push_back(r);
  }
  auto run = [&](const std::string& where) {
    EngineOptions opt;
    opt.kv = "paged";
    opt.prefill_chunk = 32;
    opt.prefix_cache = false;
    opt.sampling = where;
    return run_engine(*model, opt, rs, collect_picks);
  };
  const auto host = run("host"), batched = run("batched");
  for (size_t i = 0; i < rs.size(); ++i) {
    EXPECT_EQ(batched[i].tokens, host[i].tokens) << "request " << i;
    EXPECT_EQ(batched[i].logprobs, host[i].logprobs) << "request " << i;
    EXPECT_EQ(batched[i].alternatives, host[i].alternatives) << "request " << i;
    EXPECT_EQ(static_cast<int64_t>(batched[i].tokens.size()), rs[i].stop.max_tokens) << "request " << i;
  }
}

TEST(Determinism, UnknownSamplingPlaceOrStepGraphModeIsRefused) {
  ASSERT_TRUE(std::filesystem::exists(kGolden)) << kGolden;
  auto model = load_model(kGolden);
  EngineOptions sampling, graphs;
  sampling.sampling = "gpu";
  graphs.step_graphs = "sometimes";
  EXPECT_THROW(start_engine(*model, sampling, nullptr, {}), Error);
  EXPECT_THROW(start_engine(*model, graphs, nullptr, {}), Error);
}

// Decode-only steps through the replayed step path (its host side: on the
// CPU the step's forward pass runs directly) give what steps op by op give,
// with shared prefix blocks, sampled rows and sequences joining and leaving.
namespace {

// Replayed decode steps against the same steps op by op, over a pool of `kv`.
void expect_replayed_steps_equal_op_by_op(const std::string& kv) {
  ASSERT_TRUE(std::filesystem::exists(kGolden)) << kGolden;
  auto model = load_model(kGolden);
  auto rs = requests(model->vocab_size());
  for (int i = 0; i < 4; ++i) {  // the same prompt again: its prefix blocks are shared
    Request r = rs[5];
    r.stop.max_tokens = 9 + i;
    r.sampling.logprobs = i % 2 == 1;
    r.sampling.top_logprobs = i % 2 ? 3 : 0;
    rs.push_back(r);
  }
  auto run = [&](const std::string& graphs, Stats* st) {
    EngineOptions opt;
    opt.kv = kv;
    opt.prefill_chunk = 32;
    opt.sampling = "batched";
    opt.step_graphs = graphs;
    return run_engine(*model, opt, rs, collect_picks, st);
  };
  // Some rows end on a stop token in the middle of the run while the others
  // go on (their step launched ahead carries a row that is dropped).
  Stats first_st;
  const auto first = run("off", &first_st);
  for (size_t i : {0, 2, 7}) rs[i].stop.stop_token_ids = {first[i].tokens.at(3)};
  Stats replayed_st, eager_st;
  const auto replayed = run("always", &replayed_st), eager = run("off", &eager_st);
  for (size_t i : {0, 2, 7}) EXPECT_LE(eager[i].tokens.size(), 4u) << "request " << i;
  for (size_t i = 0; i < rs.size(); ++i) {
    EXPECT_EQ(replayed[i].tokens, eager[i].tokens) << "request " << i;
    EXPECT_EQ(replayed[i].logprobs, eager[i].logprobs) << "request " << i;
    EXPECT_EQ(replayed[i].alternatives, eager[i].alternatives) << "request " << i;
    if (rs[i].stop.stop_token_ids.empty()) {
      EXPECT_EQ(static_cast<int64_t>(replayed[i].tokens.size()), rs[i].stop.max_tokens) << "request " << i;
    }
  }
  EXPECT_GT(replayed_st.graph_steps, 0);
  EXPECT_EQ(eager_st.graph_steps, 0);
  EXPECT_EQ(replayed_st.graphs_captured, 0);  // the CPU captures nothing
}

}  // namespace

TEST(Determinism, ReplayedDecodeStepsEqualStepsOpByOp) { expect_replayed_steps_equal_op_by_op("paged"); }

TEST(Determinism, ReplayedKv8DecodeStepsEqualStepsOpByOp) { expect_replayed_steps_equal_op_by_op("kv8"); }

// Short prompts, so nearly every step is decode-only and the next one is
// launched before the tokens are emitted: rows ending on a stop token or at
// max_tokens leave the batch, the others' tokens are those of steps op by op.
TEST(Determinism, StepsLaunchedAheadEqualStepsOpByOp) {
  ASSERT_TRUE(std::filesystem::exists(kGolden)) << kGolden;
  auto model = load_model(kGolden);
  std::vector<Request> rs;
  std::mt19937 g(7);
  for (int i = 0; i < 10; ++i) {
    Request r;
    for (int j = 0; j < 4 + i % 3; ++j) r.prompt.push_back(static_cast<int32_t>(g() % model->vocab_size()));
    r.stop.max_tokens = 6 + 3 * i;
    r.stop.ignore_eos = true;
    r.sampling.temperature = i % 3 == 0 ? 0.0f : 0.9f;
    r.sampling.top_k = 20;
    r.sampling.seed = 500 + i;
    rs.push_back(r);
  }
  auto run = [&](const std::string& graphs) {
    EngineOptions opt;
    opt.kv = "paged";
    opt.sampling = "batched";
    opt.step_graphs = graphs;
    return run_engine(*model, opt, rs, collect);
  };
  const auto first = run("off");
  for (size_t i : {1, 4, 8}) rs[i].stop.stop_token_ids = {first[i].at(2)};
  const auto ahead = run("always"), eager = run("off");
  EXPECT_EQ(ahead, eager);
  for (size_t i : {1, 4, 8}) EXPECT_LE(eager[i].size(), 3u) << "request " << i;
}

namespace {

// A model whose replayable step always fails (a backend that cannot capture
// some kernel): everything else goes to the real model.
class StepFails final : public Model {
 public:
  explicit StepFails(Model& m) : m_(m) {}
  const ModelConfig& config() const override { return m_.config(); }
  Tensor forward(const BatchInput& in) override {
    if (in.step) fail(ErrorKind::Unsupported, "no step here");
    return m_.forward(in);
  }
  std::vector<kv::LayerSpec> cache_layout() const override { return m_.cache_layout(); }
  DType kv_dtype() const override { return m_.kv_dtype(); }
  Device device() const override { return m_.device(); }
  size_t weight_bytes() const override { return m_.weight_bytes(); }
  bool supports_step_inputs() const override { return true; }

 private:
  Model& m_;
};

}  // namespace

// A step that fails to replay runs op by op instead, and so do the later
// ones: no request sees the failure.
TEST(Determinism, FailedReplayFallsBackToStepsOpByOp) {
  ASSERT_TRUE(std::filesystem::exists(kGolden)) << kGolden;
  auto model = load_model(kGolden);
  StepFails failing(*model);
  auto rs = requests(model->vocab_size());
  rs.resize(6);
  auto run = [&](Model& m, const std::string& graphs, Stats* st) {
    EngineOptions opt;
    opt.kv = "paged";
    opt.step_graphs = graphs;
    return run_engine(m, opt, rs, collect, st);
  };
  Stats failed_st;
  const auto fell_back = run(failing, "always", &failed_st), eager = run(*model, "off", nullptr);
  EXPECT_EQ(fell_back, eager);
  EXPECT_EQ(failed_st.graph_steps, 0);
}

