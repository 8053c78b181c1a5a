// llama2.c checkpoint validation, on modified copies of stories260K written to a temp dir.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "llama_test_util.h"
#include "tandem/kernels/backend.h"
#include "tandem/model/loader.h"

namespace tandem::model {
namespace {

using ::testing::HasSubstr;
using testing::KvPool;

namespace fs = std::filesystem;

// stories260K's header: dim 64, hidden 172, 5 layers, 8 heads, 4 kv heads, vocab 512, seq 512.
constexpr std::int64_t kDim = 64, kVocab = 512, kLayers = 5;
constexpr std::size_t kHeaderBytes = 28;

class Llama2cLoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TANDEM_SKIP_WITHOUT_STORIES260K();
    std::ifstream in(testing::Stories260KDir() / "model.bin", std::ios::binary);
    bytes_.assign(std::istreambuf_iterator<char>(in), {});
    backend_ = kernels::CreateReferenceCpuBackend();
    dir_ = fs::path(::testing::TempDir()) /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::create_directories(dir_);
  }

  std::int32_t HeaderField(int i) const {
    std::int32_t v;
    std::memcpy(&v, bytes_.data() + 4 * i, 4);
    return v;
  }
  void SetHeaderField(std::vector<char>* bytes, int i, std::int32_t v) {
    std::memcpy(bytes->data() + 4 * i, &v, 4);
  }

  std::string Write(const std::vector<char>& bytes) {
    const fs::path file = dir_ / "model.bin";
    std::ofstream(file, std::ios::binary | std::ios::trunc)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return file.string();
  }

  absl::StatusOr<std::unique_ptr<Model>> Load(const std::vector<char>& bytes,
                                              LoadOptions options = {}) {
    return LoadModel(Write(bytes), options, backend_.get());
  }

  std::vector<float> LastLogits(Model& model, const std::vector<std::int32_t>& prompt) {
    KvPool pool(model.kv_layout(), 4);
    const auto table = KvPool::Blocks(0, 4);
    SequenceChunk chunk{prompt, 0, table, LogitsMode::kLast};
    std::vector<float> logits;
    EXPECT_TRUE(model.Forward({&chunk, 1}, pool.storage(), &logits).ok());
    return logits;
  }

  std::vector<char> bytes_;
  std::unique_ptr<kernels::Backend> backend_;
  fs::path dir_;
};

TEST_F(Llama2cLoaderTest, LoadsTheHeaderIntoTheConfig) {
  auto model = LoadModel(testing::Stories260KDir().string(), {}, backend_.get());
  ASSERT_TRUE(model.ok()) << model.status();
  const ModelConfig& c = (*model)->config();
  EXPECT_EQ(c.arch, Architecture::kLlama);
  EXPECT_EQ(c.name, "stories260K");
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.num_layers, 5);
  EXPECT_EQ(c.max_position_embeddings, 512);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_id, 2);
  EXPECT_EQ((*model)->kv_layout().num_layers, 5);
  EXPECT_EQ((*model)->kv_layout().floats_per_token, 2 * 4 * 8);
}

TEST_F(Llama2cLoaderTest, ServedNameComesFromOptionsOrTheDirectory) {
  auto named = Load(bytes_, {.served_name = "tiny-stories"});
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ((*named)->config().name, "tiny-stories");
  auto by_dir = Load(bytes_);
  ASSERT_TRUE(by_dir.ok()) << by_dir.status();
  EXPECT_EQ((*by_dir)->config().name, dir_.filename().string());
}

TEST_F(Llama2cLoaderTest, TruncatedFileSaysExpectedAndActualBytes) {
  auto bytes = bytes_;
  bytes.resize(bytes.size() - 100);
  auto model = Load(bytes);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(),
              HasSubstr("implies " + std::to_string(bytes_.size()) + " bytes, file has " +
                        std::to_string(bytes.size()) + " (truncated)"));
}

TEST_F(Llama2cLoaderTest, TrailingBytesAreRejected) {
  auto bytes = bytes_;
  bytes.resize(bytes.size() + 4);
  EXPECT_THAT(Load(bytes).status().message(), HasSubstr("file has " + std::to_string(bytes.size())));
}

TEST_F(Llama2cLoaderTest, ShorterThanTheHeaderIsRejected) {
  EXPECT_THAT(Load(std::vector<char>(bytes_.begin(), bytes_.begin() + 10)).status().message(),
              HasSubstr("too short"));
}

TEST_F(Llama2cLoaderTest, BadHeaderFieldsAreNamed) {
  struct Case {
    int field;
    std::int32_t value;
    const char* message;
  };
  for (const Case& c : {Case{0, 0, "dim is 0"}, Case{0, -64, "dim is -64"},
                        Case{2, 0, "n_layers is 0"}, Case{3, 0, "n_heads is 0"},
                        Case{3, 7, "must split into n_heads 7"},
                        Case{4, 3, "not a multiple of n_kv_heads 3"},
                        Case{4, 16, "n_kv_heads is 16"}, Case{5, 0, "|vocab_size| is 0"},
                        Case{6, -1, "seq_len is -1"}, Case{1, 1 << 30, "hidden_dim"}}) {
    auto bytes = bytes_;
    SetHeaderField(&bytes, c.field, c.value);
    EXPECT_THAT(Load(bytes).status().message(), HasSubstr(c.message))
        << "field " << c.field << " = " << c.value;
  }
}

TEST_F(Llama2cLoaderTest, HeaderThatDisagreesWithTheSizeIsRejected) {
  auto bytes = bytes_;
  SetHeaderField(&bytes, 2, HeaderField(2) + 1);  // one more layer than the file holds
  EXPECT_THAT(Load(bytes).status().message(), HasSubstr("(truncated)"));
}

TEST_F(Llama2cLoaderTest, NonFiniteWeightIsFoundWithCheckFinite) {
  auto bytes = bytes_;
  // Layer 2's wq: after token_embedding, all rms_att, and layers 0-1 of wq.
  const std::int64_t float_index = kVocab * kDim + kLayers * kDim + 2 * kDim * kDim + 5;
  const float nan = std::nanf("");
  std::memcpy(bytes.data() + kHeaderBytes + 4 * float_index, &nan, 4);
  auto checked = Load(bytes, {.check_finite = true});
  ASSERT_FALSE(checked.ok());
  EXPECT_THAT(checked.status().message(), HasSubstr("layers.2.wq"));
  EXPECT_THAT(checked.status().message(), HasSubstr("flat index 5"));
  EXPECT_TRUE(Load(bytes, {.check_finite = false}).ok()) << "the scan is opt-in";
}

TEST_F(Llama2cLoaderTest, SeparateClassifierIsReadAfterTheRopeTables) {
  // Negative vocab_size: wcls follows the file; a copy of the embedding must give the same logits
  // as the shared classifier, and a zeroed one must not.
  auto bytes = bytes_;
  SetHeaderField(&bytes, 5, -static_cast<std::int32_t>(kVocab));
  const auto embed_begin = bytes_.begin() + kHeaderBytes;
  bytes.insert(bytes.end(), embed_begin, embed_begin + kVocab * kDim * 4);
  auto shared = LoadModel(testing::Stories260KDir().string(), {}, backend_.get());
  ASSERT_TRUE(shared.ok()) << shared.status();
  const std::vector<std::int32_t> prompt = {1, 403, 407, 261, 378};
  const auto expected = LastLogits(**shared, prompt);
  {
    auto separate = Load(bytes);
    ASSERT_TRUE(separate.ok()) << separate.status();
    EXPECT_EQ(LastLogits(**separate, prompt), expected);
  }
  std::fill(bytes.end() - kVocab * kDim * 4, bytes.end(), 0);
  auto zeroed = Load(bytes);
  ASSERT_TRUE(zeroed.ok()) << zeroed.status();
  EXPECT_NE(LastLogits(**zeroed, prompt), expected);
}

}  // namespace
}  // namespace tandem::model
