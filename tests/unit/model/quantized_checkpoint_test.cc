// F16 and FP8 checkpoints (tools/fixtures/make_quantized_fixtures.py): the weights stay in their
// stored dtype and the kernels widen them in registers, so a quantised model must give exactly
// the logits (and greedy tokens) of its dequantised float32 twin; against the float32 model it
// was quantised from, it is off by the quantisation error, bounded per fixture below.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/hf_config.h"
#include "checkpoint/safetensors.h"
#include "gtest/gtest.h"
#include "hf_fixture_test_util.h"
#include "tandem/kernels/backend.h"
#include "tandem/model/loader.h"

namespace tandem::model {
namespace {

using testing::FixtureDir;
using testing::LoadReference;
using testing::MaxRelError;
using testing::Reference;
using testing::TestKv;
using Json = nlohmann::json;

// The float32 twin of a quantised fixture, written by dequantising through WeightView::At (which
// the safetensors test checks against numpy's dequantisation): same config without
// quantization_config, every tensor but the scales as F32.
std::string WriteF32Twin(const std::string& fixture) {
  namespace fs = std::filesystem;
  const std::string src = FixtureDir(fixture);
  const fs::path dst = fs::temp_directory_path() /
                       ("tandem_twin_" + fixture + "_" + std::to_string(::getpid()));
  fs::remove_all(dst);
  fs::create_directories(dst);
  Json config = Json::parse(testing::ReadBytes(src + "/config.json"));
  config.erase("quantization_config");
  config["dtype"] = "float32";
  testing::WriteBytes((dst / "config.json").string(), config.dump(2));

  auto hf = internal::ReadHfConfig(src);
  EXPECT_TRUE(hf.ok()) << hf.status();
  auto ckpt = internal::SafetensorsCheckpoint::Open(src, hf->fp8_block);
  EXPECT_TRUE(ckpt.ok()) << ckpt.status();
  Json header;
  std::string data;
  for (const auto& [name, t] : ckpt->tensors()) {
    if (name.ends_with("_scale_inv")) continue;
    const std::size_t begin = data.size();
    for (std::int64_t r = 0; r < t.view.rows; ++r) {
      for (std::int64_t c = 0; c < t.view.cols; ++c) {
        const float v = t.view.At(r, c);
        data.append(reinterpret_cast<const char*>(&v), sizeof(v));
      }
    }
    header[name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {begin, data.size()}}};
  }
  testing::WriteBytes((dst / "model.safetensors").string(),
                      testing::SafetensorsBytes(header, data));
  return dst.string();
}

std::unique_ptr<Model> Load(const std::string& dir, kernels::Backend* backend, bool mla_absorbed) {
  LoadOptions options;
  options.check_finite = true;
  options.mla_absorbed = mla_absorbed;
  auto model = LoadModel(dir, options, backend);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? std::move(*model) : nullptr;
}

struct GreedyRun {
  std::vector<float> prompt_logits;  // every prompt position
  std::vector<std::int32_t> tokens;  // greedy continuation
  std::vector<float> decode_logits;  // the rows the greedy tokens were taken from
};

// Prefill of the prompt in one chunk, then `steps` greedy decode steps.
GreedyRun Greedy(Model& model, const std::vector<std::int32_t>& prompt, int steps) {
  const int vocab = model.config().vocab_size;
  const int blocks = static_cast<int>(prompt.size() + steps) / 4 + 2;
  TestKv kv(model.kv_layout(), blocks);
  const std::vector<std::int32_t> table = TestKv::Table(0, blocks);
  GreedyRun run;
  std::vector<std::int32_t> seq = prompt;
  std::vector<float> logits;
  SequenceChunk c;
  c.tokens = prompt;
  c.block_table = table;
  c.logits = LogitsMode::kAll;
  EXPECT_TRUE(model.Forward({&c, 1}, kv.storage, &logits).ok());
  run.prompt_logits = logits;
  for (int s = 0; s < steps; ++s) {
    const float* last = logits.data() + logits.size() - vocab;
    run.decode_logits.insert(run.decode_logits.end(), last, last + vocab);
    const auto next = static_cast<std::int32_t>(std::max_element(last, last + vocab) - last);
    run.tokens.push_back(next);
    seq.push_back(next);
    logits.clear();
    c.tokens = std::span<const std::int32_t>(seq.data() + seq.size() - 1, 1);
    c.start_pos = static_cast<int>(seq.size()) - 1;
    c.logits = LogitsMode::kLast;
    EXPECT_TRUE(model.Forward({&c, 1}, kv.storage, &logits).ok());
  }
  return run;
}

bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct Case {
  std::string fixture;      // quantised
  std::string f32_fixture;  // the float32 fixture it was made from (reference.json)
  // Bound on the per-row relative error of the prompt logits against the float32 model's
  // transformers reference: the quantisation error, measured on these fixtures (see the report
  // in docs/performance.md) with about 2x headroom.
  double quantisation_tolerance;
  // Whether the quantised model's greedy tokens are the float32 reference's on this fixture (V4's
  // tiny fixture is scaled so that every mechanism moves the logits, and FP8 moves them past
  // its near-ties; see docs/performance.md).
  bool same_tokens_as_float32;
};

class QuantizedCheckpoint : public ::testing::TestWithParam<Case> {};

TEST_P(QuantizedCheckpoint, SameLogitsAndGreedyTokensAsDequantisedTwin) {
  const Case& tc = GetParam();
  const Reference ref = LoadReference(tc.f32_fixture);
  const std::string twin_dir = WriteF32Twin(tc.fixture);
  // The last pass: DeepSeek-V3's naive MLA, which multiplies the cached latents by the whole FP8
  // kv_b_proj rather than reading it through the absorbed per-head copies (other models ignore
  // the option).
  for (int pass = 0; pass < 3; ++pass) {
    const bool reference_backend = pass == 1;
    const bool absorbed = pass != 2;
    SCOPED_TRACE(reference_backend ? "reference backend" : absorbed ? "fast backend" : "naive MLA");
    std::unique_ptr<kernels::Backend> backend = reference_backend
                                                    ? kernels::CreateReferenceCpuBackend()
                                                    : kernels::CreateCpuBackend({.num_threads = 2});
    std::unique_ptr<Model> quantised = Load(FixtureDir(tc.fixture), backend.get(), absorbed);
    std::unique_ptr<Model> twin = Load(twin_dir, backend.get(), absorbed);
    ASSERT_NE(quantised, nullptr);
    ASSERT_NE(twin, nullptr);
    const GreedyRun q = Greedy(*quantised, ref.prompt, 8);
    const GreedyRun t = Greedy(*twin, ref.prompt, 8);
    EXPECT_EQ(q.tokens, t.tokens);
    ASSERT_EQ(q.prompt_logits.size(), t.prompt_logits.size());
    EXPECT_TRUE(BitEqual(q.prompt_logits, t.prompt_logits));
    EXPECT_TRUE(BitEqual(q.decode_logits, t.decode_logits));
    const double err = MaxRelError(q.prompt_logits, ref.prompt_logits);
    EXPECT_LT(err, tc.quantisation_tolerance);
    const std::size_t n = std::min(q.tokens.size(), ref.generated.size());
    const bool same_tokens = std::equal(q.tokens.begin(), q.tokens.begin() + n, ref.generated.begin());
    if (tc.same_tokens_as_float32) {
      EXPECT_TRUE(same_tokens);
    }
    std::cout << tc.fixture << ": prompt logits vs the float32 model's reference: " << err
              << " relative; greedy tokens " << (same_tokens ? "equal" : "differ from")
              << " the float32 reference's\n";
  }
  std::filesystem::remove_all(twin_dir);
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, QuantizedCheckpoint,
    ::testing::Values(Case{"deepseek_v3_tiny_fp8", "deepseek_v3_tiny", 0.2, true},
                      Case{"deepseek_v4_tiny_fp8", "deepseek_v4_tiny", 1.0, false},
                      Case{"llama_tiny_f16", "llama_tiny", 0.003, true}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.fixture; });

}  // namespace
}  // namespace tandem::model
