// Sharding plans and the host collective: which slice every rank holds, the
// configs that cannot be split, and a group that never hangs when a rank fails.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include <nlohmann/json.hpp>

#include "parallel/local_group.h"
#include "parallel/rank_threads.h"
#include "parallel/shard_plan.h"
#include "util/error.h"

using namespace ingot;
using namespace ingot::parallel;

namespace {

ModelConfig llama8b_shape() {
  ModelConfig c;
  c.model_type = "llama";
  c.hidden_size = 4096;
  c.num_attention_heads = 32;
  c.num_key_value_heads = 8;
  c.head_dim = 128;
  c.intermediate_size = 14336;
  return c;
}

const std::string L = "model.layers.3.";

}  // namespace

TEST(ShardPlan, SplitsHeadsAndIntermediateEvenly) {
  ShardPlan p(llama8b_shape(), 4);
  ModelConfig rc = p.rank_config();
  EXPECT_EQ(rc.num_attention_heads, 8);
  EXPECT_EQ(rc.num_key_value_heads, 2);
  EXPECT_EQ(rc.intermediate_size, 3584);
  EXPECT_EQ(rc.hidden_size, 4096);
  EXPECT_EQ(p.split_of(L + "self_attn.q_proj.weight"), Split::Rows);
  EXPECT_EQ(p.split_of(L + "self_attn.v_proj.bias"), Split::Rows);
  EXPECT_EQ(p.split_of(L + "self_attn.o_proj.weight"), Split::Cols);
  EXPECT_EQ(p.split_of(L + "self_attn.o_proj.bias"), Split::FirstRankOnly);
  EXPECT_EQ(p.split_of(L + "mlp.up_proj.weight"), Split::Rows);
  EXPECT_EQ(p.split_of(L + "mlp.down_proj.weight"), Split::Cols);
  EXPECT_EQ(p.split_of(L + "mlp.down_proj.bias"), Split::FirstRankOnly);
  EXPECT_EQ(p.split_of(L + "input_layernorm.weight"), Split::Replicated);
  EXPECT_EQ(p.split_of("model.embed_tokens.weight"), Split::Replicated);
  EXPECT_EQ(p.split_of("lm_head.weight"), Split::Replicated);
  Range q = p.range_of(L + "self_attn.q_proj.weight", 2);
  EXPECT_EQ(q.begin, 2 * 8 * 128);
  EXPECT_EQ(q.end, 3 * 8 * 128);
  Range k = p.range_of(L + "self_attn.k_proj.weight", 2);
  EXPECT_EQ(k.begin, 2 * 2 * 128);
  EXPECT_EQ(k.end, 3 * 2 * 128);
  Range o = p.range_of(L + "self_attn.o_proj.weight", 3);
  EXPECT_EQ(o.begin, 3 * 1024);
  EXPECT_EQ(o.size(), 1024);
  Range d = p.range_of(L + "mlp.down_proj.weight", 1);
  EXPECT_EQ(d.begin, 3584);
  EXPECT_EQ(d.end, 7168);
}

TEST(ShardPlan, ReplicatesKvHeadsWhenRanksOutnumberThem) {
  ShardPlan p(llama8b_shape(), 16);  // 8 KV heads, 16 ranks: each KV head on two ranks
  EXPECT_EQ(p.rank_config().num_key_value_heads, 1);
  EXPECT_EQ(p.rank_config().num_attention_heads, 2);
  for (int r = 0; r < 16; ++r) {
    Range k = p.range_of(L + "self_attn.k_proj.weight", r);
    EXPECT_EQ(k.begin, (r / 2) * 128) << r;
    EXPECT_EQ(k.size(), 128);
    // The query heads of rank r are 2r and 2r+1; with 4 per KV head they read KV head r/2.
    Range q = p.range_of(L + "self_attn.q_proj.weight", r);
    EXPECT_EQ(q.begin / 128 / 4, r / 2);
  }
}

TEST(ShardPlan, SplitsEveryExpertAndTheSharedExpert) {
  ModelConfig c = llama8b_shape();
  c.model_type = "qwen3_moe";
  c.raw = std::make_shared<nlohmann::json>(
      nlohmann::json{{"moe_intermediate_size", 768}, {"shared_expert_intermediate_size", 512}});
  ShardPlan p(c, 4);
  const std::string m = L + "mlp.";
  EXPECT_EQ(p.split_of(m + "gate.weight"), Split::Replicated);  // the router
  EXPECT_EQ(p.split_of(m + "shared_expert_gate.weight"), Split::Replicated);
  EXPECT_EQ(p.split_of(m + "experts.7.up_proj.weight"), Split::Rows);
  EXPECT_EQ(p.split_of(m + "experts.7.down_proj.weight"), Split::Cols);
  EXPECT_EQ(p.split_of(m + "shared_expert.down_proj.weight"), Split::Cols);
  Range e = p.range_of(m + "experts.7.gate_proj.weight", 1);
  EXPECT_EQ(e.begin, 192);
  EXPECT_EQ(e.end, 384);
  Range s = p.range_of(m + "shared_expert.down_proj.weight", 3);
  EXPECT_EQ(s.begin, 384);
  EXPECT_EQ(s.end, 512);
  ModelConfig rc = p.rank_config();
  EXPECT_EQ(rc.get_int("moe_intermediate_size", 0), 192);
  EXPECT_EQ(rc.get_int("shared_expert_intermediate_size", 0), 128);
  EXPECT_EQ(c.get_int("moe_intermediate_size", 0), 768) << "the full config is untouched";
  c.raw = std::make_shared<nlohmann::json>(nlohmann::json{{"moe_intermediate_size", 770}});
  EXPECT_THROW(ShardPlan(c, 4), Error);
}

TEST(ShardPlan, RefusesWhatCannotBeSplit) {
  auto expect_error = [](ModelConfig c, int n, ErrorKind kind, const char* needle) {
    try {
      ShardPlan p(c, n);
      ADD_FAILURE() << "accepted " << n << " ranks";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), kind) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error(llama8b_shape(), 3, ErrorKind::InvalidArgument, "num_attention_heads");
  expect_error(llama8b_shape(), 0, ErrorKind::InvalidArgument, "at least 1");
  ModelConfig odd_kv = llama8b_shape();
  odd_kv.num_key_value_heads = 3;
  odd_kv.num_attention_heads = 24;
  expect_error(odd_kv, 2, ErrorKind::InvalidArgument, "num_key_value_heads");
  ModelConfig odd_mlp = llama8b_shape();
  odd_mlp.intermediate_size = 14337;
  expect_error(odd_mlp, 2, ErrorKind::InvalidArgument, "intermediate_size");
  ModelConfig gemma = llama8b_shape();
  gemma.model_type = "gemma3_text";
  expect_error(gemma, 2, ErrorKind::Unsupported, "gemma3_text");
}

TEST(LocalGroup, EveryRankGetsTheSameSum) {
  const int n = 4;
  LocalGroup g(n);
  std::vector<std::vector<float>> got(n);
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r)
    ts.emplace_back([&, r] {
      std::vector<float> v(1000);
      for (size_t i = 0; i < v.size(); ++i) v[i] = 0.1f * float(r + 1) + 1e-3f * float(i);
      for (int round = 0; round < 3; ++round) got[r] = g.member(r).all_reduce_sum(Tensor::from_f32(v, {10, 100})).to_f32_vector();
    });
  for (auto& t : ts) t.join();
  for (size_t i = 0; i < 1000; ++i) {
    float want = 0;
    for (int r = 0; r < n; ++r) want += 0.1f * float(r + 1) + 1e-3f * float(i);
    EXPECT_NEAR(got[0][i], want, 1e-5);
  }
  for (int r = 1; r < n; ++r) EXPECT_EQ(got[r], got[0]) << "rank " << r << " differs bitwise";
}

TEST(LocalGroup, AbortReleasesAWaitingRank) {
  LocalGroup g(2);
  auto waiting = std::async(std::launch::async, [&] {
    try {
      g.member(0).all_reduce_sum(Tensor::from_f32({1, 2}, {2}));
      return std::string("returned");
    } catch (const Error& e) {
      return std::string(e.what());
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  g.abort();
  ASSERT_EQ(waiting.wait_for(std::chrono::seconds(10)), std::future_status::ready) << "rank 0 hung";
  EXPECT_NE(waiting.get().find("aborted"), std::string::npos);
}

TEST(RankThreads, AFailingRankNeitherHangsNorHidesItsError) {
  LocalGroup g(3);
  RankThreads threads(3);
  for (int round = 0; round < 3; ++round) {
    g.reset();
    try {
      threads.run(
          [&](int r) {
            if (r == 1) fail(ErrorKind::ResourceExhausted, "rank 1 out of memory");
            g.member(r).all_reduce_sum(Tensor::from_f32({1}, {1}));
          },
          [&] { g.abort(); });
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("rank 1 out of memory"), std::string::npos) << e.what();
    }
  }
  // The group works again after a reset.
  g.reset();
  std::vector<float> sums(3);
  threads.run([&](int r) { sums[r] = g.member(r).all_reduce_sum(Tensor::from_f32({float(r)}, {1})).to_f32_vector()[0]; },
              [&] { g.abort(); });
  EXPECT_EQ(sums, (std::vector<float>{3, 3, 3}));
}
