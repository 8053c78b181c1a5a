// Rotary tables against transformers' own (recorded in the fixtures' reference.json by
// tools/fixtures/make_hf_fixtures.py from model.rotary_emb and self_attn.scaling).
#include "rope.h"

#include <cmath>
#include <string>

#include "checkpoint/hf_config.h"
#include "gtest/gtest.h"
#include "hf_fixture_test_util.h"

namespace tandem::model::internal {
namespace {

using tandem::model::testing::FixtureDir;
using tandem::model::testing::LoadReference;

void ExpectTablesMatch(const std::string& fixture, const RopeTables& t, double softmax_scale) {
  const auto ref = LoadReference(fixture).raw;
  const auto inv_freq = ref.at("rope_inv_freq").get<std::vector<double>>();
  ASSERT_EQ(t.inv_freq.size(), inv_freq.size()) << fixture;
  for (std::size_t i = 0; i < inv_freq.size(); ++i) {
    EXPECT_NEAR(t.inv_freq[i], inv_freq[i], 1e-6 * inv_freq[i]) << fixture << " i=" << i;
  }
  EXPECT_NEAR(t.cos_sin_scale, ref.at("rope_attention_scaling").get<double>(), 1e-6) << fixture;
  EXPECT_NEAR(softmax_scale, ref.at("attention_softmax_scale").get<double>(), 1e-6) << fixture;
}

TEST(Rope, YarnMatchesTransformers) {
  // deepseek_v3_tiny: mscale != mscale_all_dim (cos/sin scaled); noqlora: equal (scale 1).
  for (const std::string fixture : {"deepseek_v3_tiny", "deepseek_v3_tiny_noqlora"}) {
    auto c = ReadHfConfig(FixtureDir(fixture));
    ASSERT_TRUE(c.ok()) << c.status();
    const DeepseekV3Config& d = c->deepseek;
    const RopeTables t = ComputeRopeTables(d.qk_rope_head_dim, d.rope_theta, d.rope_scaling);
    ExpectTablesMatch(fixture, t, t.softmax_scale_factor / std::sqrt(double(d.qk_head_dim())));
  }
}

TEST(Rope, Llama3MatchesTransformers) {
  auto c = ReadHfConfig(FixtureDir("llama_tiny"));
  ASSERT_TRUE(c.ok()) << c.status();
  const LlamaConfig& l = c->llama;
  const RopeTables t = ComputeRopeTables(l.head_dim, l.rope_theta, l.rope_scaling);
  ExpectTablesMatch("llama_tiny", t, 1.0 / std::sqrt(double(l.head_dim)));
}

TEST(Rope, LinearDividesEveryFrequency) {
  RopeScaling linear;
  linear.type = RopeScalingType::kLinear;
  linear.factor = 4.0f;
  const RopeTables plain = ComputeRopeTables(16, 10000.0f, RopeScaling{});
  const RopeTables scaled = ComputeRopeTables(16, 10000.0f, linear);
  for (std::size_t i = 0; i < plain.inv_freq.size(); ++i) {
    EXPECT_FLOAT_EQ(scaled.inv_freq[i] * 4.0f, plain.inv_freq[i]);
  }
  EXPECT_FLOAT_EQ(plain.inv_freq[1], 1.0f / std::pow(10000.0f, 2.0f / 16.0f));
}

TEST(Rope, FillCosSinAppliesTheAttentionScaling) {
  RopeTables t;
  t.rope_dim = 4;
  t.inv_freq = {1.0f, 0.5f};
  t.cos_sin_scale = 2.0f;
  const std::vector<int> positions = {3};
  float cos[2], sin[2];
  FillCosSin(t, positions, cos, sin);
  EXPECT_FLOAT_EQ(cos[1], 2.0f * std::cos(1.5f));
  EXPECT_FLOAT_EQ(sin[0], 2.0f * std::sin(3.0f));
}

}  // namespace
}  // namespace tandem::model::internal
