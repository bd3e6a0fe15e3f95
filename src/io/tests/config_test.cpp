#include <gtest/gtest.h>

#include "io/config.h"
#include "util/error.h"

using namespace ingot;

TEST(Config, RopeParametersForm) {
  ModelConfig c = parse_model_config(R"({"model_type":"llama","hidden_size":64,"num_attention_heads":4,
    "rope_parameters":{"rope_type":"llama3","rope_theta":500000.0,"factor":8.0,"low_freq_factor":1.0,
    "high_freq_factor":4.0,"original_max_position_embeddings":64}})");
  EXPECT_EQ(c.rope_for("full_attention").type, "llama3");
  EXPECT_DOUBLE_EQ(c.rope_for("full_attention").theta, 500000.0);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.num_key_value_heads, 4);
}

TEST(Config, RopeThetaAndScalingForm) {
  ModelConfig c = parse_model_config(R"({"model_type":"llama","rope_theta":500000.0,
    "rope_scaling":{"type":"llama3","factor":8.0,"original_max_position_embeddings":8192}})");
  EXPECT_EQ(c.rope_for("x").type, "llama3");
  EXPECT_DOUBLE_EQ(c.rope_for("x").factor, 8.0);
  EXPECT_DOUBLE_EQ(c.rope_for("x").original_max_position, 8192);
}

TEST(Config, PerLayerTypeRope) {
  ModelConfig c = parse_model_config(R"({"model_type":"gemma3_text","rope_parameters":{
    "full_attention":{"rope_theta":1000000.0,"rope_type":"default"},
    "sliding_attention":{"rope_theta":10000.0,"rope_type":"default"}}})");
  EXPECT_DOUBLE_EQ(c.rope_for("sliding_attention").theta, 10000.0);
  EXPECT_DOUBLE_EQ(c.rope_for("full_attention").theta, 1000000.0);
  ModelConfig old = parse_model_config(R"({"model_type":"gemma3_text","rope_theta":1000000.0,"rope_local_base_freq":10000.0})");
  EXPECT_DOUBLE_EQ(old.rope_for("sliding_attention").theta, 10000.0);
  EXPECT_DOUBLE_EQ(old.rope_for("full_attention").theta, 1000000.0);
}

TEST(Config, BadInput) {
  EXPECT_THROW(parse_model_config("{"), Error);
  EXPECT_THROW(parse_model_config("{}"), Error);  // no model_type
  EXPECT_THROW(parse_model_config(R"({"model_type":"llama","rope_scaling":{"type":"weird"}})"), Error);
  EXPECT_THROW(parse_model_config(R"({"model_type":"llama","vocab_size":"many"})"), Error);
  EXPECT_THROW(load_model_config("/nonexistent-dir"), Error);
}

TEST(Config, GenerationConfig) {
  GenerationConfig g = parse_generation_config(R"({"eos_token_id":[1,2],"bos_token_id":0,"temperature":0.7,"top_k":20})");
  EXPECT_EQ(g.eos_token_ids, (std::vector<int32_t>{1, 2}));
  EXPECT_DOUBLE_EQ(*g.temperature, 0.7);
  EXPECT_EQ(*g.top_k, 20);
}
