#include "checkpoint/hf_config.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tandem::model::internal {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

Json DeepseekJson() {
  return Json{{"architectures", {"DeepseekV3ForCausalLM"}},
              {"vocab_size", 1000},
              {"hidden_size", 64},
              {"intermediate_size", 96},
              {"moe_intermediate_size", 16},
              {"num_hidden_layers", 4},
              {"num_attention_heads", 4},
              {"q_lora_rank", nullptr},
              {"kv_lora_rank", 32},
              {"qk_nope_head_dim", 16},
              {"qk_rope_head_dim", 8},
              {"v_head_dim", 12},
              {"n_routed_experts", 8},
              {"n_shared_experts", 1},
              {"num_experts_per_tok", 2},
              {"n_group", 4},
              {"topk_group", 2},
              {"first_k_dense_replace", 1},
              {"routed_scaling_factor", 2.5},
              {"max_position_embeddings", 4096},
              {"eos_token_id", {7, 8}},
              {"rope_theta", 10000},
              {"rope_scaling",
               {{"type", "yarn"},
                {"factor", 40},
                {"original_max_position_embeddings", 4096},
                {"beta_fast", 32},
                {"beta_slow", 1},
                {"mscale", 1.0},
                {"mscale_all_dim", 1.0}}}};
}

absl::StatusOr<HfConfig> Parse(const Json& j) { return ParseHfConfig(j.dump(), "config.json"); }

TEST(HfConfig, ParsesDeepseekV3WithLegacyRopeKeys) {
  auto c = Parse(DeepseekJson());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->arch, Architecture::kDeepseekV3);
  const DeepseekV3Config& d = c->deepseek;
  EXPECT_EQ(d.q_lora_rank, 0);  // null: plain q_proj
  EXPECT_EQ(d.base.eos_token_id, 7);
  EXPECT_EQ(d.rope_layout, kernels::RopeLayout::kInterleaved);  // transformers' default
  EXPECT_EQ(d.rope_scaling.type, RopeScalingType::kYarn);
  EXPECT_EQ(d.rope_scaling.factor, 40.0f);
  EXPECT_EQ(d.rope_scaling.mscale_all_dim, 1.0f);
  EXPECT_EQ(d.rope_theta, 10000.0f);
  EXPECT_EQ(d.latent_norm_eps, 1e-6f);
}

TEST(HfConfig, TransformersFiveRopeParametersMeanTheSame) {
  Json j = DeepseekJson();
  Json rope = j["rope_scaling"];
  rope.erase("type");
  rope["rope_type"] = "yarn";
  rope["rope_theta"] = 10000;
  j.erase("rope_scaling");
  j.erase("rope_theta");
  j["rope_parameters"] = rope;
  j["rope_interleave"] = false;
  auto c = Parse(j);
  auto legacy = Parse(DeepseekJson());
  ASSERT_TRUE(c.ok() && legacy.ok());
  EXPECT_EQ(c->deepseek.rope_theta, legacy->deepseek.rope_theta);
  EXPECT_EQ(c->deepseek.rope_scaling.factor, legacy->deepseek.rope_scaling.factor);
  EXPECT_EQ(c->deepseek.rope_scaling.original_max_position_embeddings,
            legacy->deepseek.rope_scaling.original_max_position_embeddings);
  EXPECT_EQ(c->deepseek.rope_layout, kernels::RopeLayout::kHalfSplit);
}

TEST(HfConfig, YarnFactorDefaultsToTheContextRatio) {
  Json j = DeepseekJson();
  j["rope_scaling"].erase("factor");
  j["rope_scaling"]["original_max_position_embeddings"] = 1024;
  auto c = Parse(j);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->deepseek.rope_scaling.factor, 4.0f);
}

TEST(HfConfig, ParsesLlamaDefaults) {
  const Json j = {{"architectures", {"LlamaForCausalLM"}},
                  {"vocab_size", 32},
                  {"hidden_size", 64},
                  {"intermediate_size", 128},
                  {"num_hidden_layers", 2},
                  {"num_attention_heads", 8},
                  {"tie_word_embeddings", true},
                  {"rope_scaling",
                   {{"rope_type", "llama3"},
                    {"factor", 8.0},
                    {"low_freq_factor", 1.0},
                    {"high_freq_factor", 4.0},
                    {"original_max_position_embeddings", 8192}}}};
  auto c = Parse(j);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->llama.num_kv_heads, 8);
  EXPECT_EQ(c->llama.head_dim, 8);
  EXPECT_EQ(c->llama.rope_layout, kernels::RopeLayout::kHalfSplit);
  EXPECT_EQ(c->llama.rope_scaling.type, RopeScalingType::kLlama3);
  EXPECT_EQ(c->llama.rope_scaling.original_max_position_embeddings, 8192);
}

TEST(HfConfig, Fp8BlockSizeComesFromQuantizationConfig) {
  Json j = DeepseekJson();
  auto plain = Parse(j);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->fp8_block.rows, 128);  // DeepSeek's, when the config names none
  EXPECT_EQ(plain->fp8_block.cols, 128);
  j["quantization_config"] = {{"activation_scheme", "dynamic"}, {"fmt", "e4m3"},
                              {"quant_method", "fp8"}, {"weight_block_size", {16, 32}}};
  auto fp8 = Parse(j);
  ASSERT_TRUE(fp8.ok()) << fp8.status();
  EXPECT_EQ(fp8->fp8_block.rows, 16);
  EXPECT_EQ(fp8->fp8_block.cols, 32);

  j["quantization_config"]["weight_block_size"] = {128, 96};
  EXPECT_THAT(Parse(j).status().message(), HasSubstr("weight_block_size [128, 96]"));
  j["quantization_config"]["weight_block_size"] = {128};
  EXPECT_THAT(Parse(j).status().message(), HasSubstr("two integers"));
  j["quantization_config"]["weight_block_size"] = {128, 128};
  j["quantization_config"]["fmt"] = "e5m2";
  EXPECT_THAT(Parse(j).status().message(), HasSubstr("fmt \"e5m2\""));
  j["quantization_config"] = {{"quant_method", "gptq"}};
  EXPECT_THAT(Parse(j).status().message(), HasSubstr("quant_method \"gptq\""));
}

TEST(HfConfig, UnsupportedInputsAreNamed) {
  Json j = DeepseekJson();
  j["architectures"] = {"Qwen2ForCausalLM"};
  EXPECT_THAT(Parse(j).status().message(), HasSubstr("unsupported architecture Qwen2ForCausalLM"));
  EXPECT_EQ(Parse(j).status().code(), absl::StatusCode::kUnimplemented);

  j = DeepseekJson();
  j["rope_scaling"]["type"] = "longrope";
  EXPECT_THAT(Parse(j).status().message(), HasSubstr("rope type \"longrope\""));

  j = DeepseekJson();
  j["scoring_func"] = "softmax";
  EXPECT_THAT(Parse(j).status().message(), HasSubstr("scoring_func \"softmax\""));

  j = DeepseekJson();
  j["kv_lora_rank"] = "big";
  EXPECT_THAT(Parse(j).status().message(), HasSubstr("field kv_lora_rank is not an integer"));

  j = DeepseekJson();
  j.erase("v_head_dim");
  EXPECT_THAT(Parse(j).status().message(), HasSubstr("missing field v_head_dim"));

  j = DeepseekJson();
  j.erase("architectures");
  EXPECT_THAT(Parse(j).status().message(), HasSubstr("architectures"));

  EXPECT_THAT(ParseHfConfig("{not json", "c.json").status().message(), HasSubstr("c.json"));
}

}  // namespace
}  // namespace tandem::model::internal
