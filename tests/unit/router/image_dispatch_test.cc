// Images the chosen worker's prefix cache covers (per the router's index) skip the encoder, and a
// worker whose cache did not hold one after all gets the request again with every image encoded:
// before its first token under a new id, after it as a migration that resumes the stream.
#include <memory>
#include <string>
#include <vector>

#include "admission/admission.h"
#include "async/event.h"
#include "dispatch/dispatcher.h"
#include "dispatch/run_admitted.h"
#include "fake_encoder.h"
#include "fake_worker.h"
#include "gtest/gtest.h"
#include "workers/worker_selector.h"

namespace tandem::router {
namespace {

using testing::FakeEncoder;
using testing::FakeWorker;
using testing::WorkerScript;

constexpr std::uint32_t kImageRows = 5;

class CollectingSink final : public TokenSink {
 public:
  bool OnTokens(std::span<const std::int32_t> ids) override {
    tokens.insert(tokens.end(), ids.begin(), ids.end());
    return true;
  }
  std::vector<std::int32_t> tokens;
};

// The least-loaded plan, said to have the first `covered` prompt tokens in its prefix cache.
class CoveringSelector final : public WorkerSelector {
 public:
  CoveringSelector(WorkerRegistry* registry, std::int64_t covered)
      : inner_(registry), covered_(covered) {}
  absl::StatusOr<WorkerPlan> Select(const std::string& model,
                                    std::span<const std::int32_t> prompt) override {
    absl::StatusOr<WorkerPlan> plan = inner_.Select(model, prompt);
    if (plan.ok()) plan->predicted_cached_tokens = covered_;
    return plan;
  }
  absl::StatusOr<int> MaxContext(const std::string& model) override {
    return inner_.MaxContext(model);
  }

 private:
  LeastLoadedSelector inner_;
  const std::int64_t covered_;
};

class ImageDispatchTest : public ::testing::Test {
 protected:
  ImageDispatchTest() {
    Register(encoder_.Info());
  }

  FakeWorker* Add(const std::string& id, v1::WorkerRole role, WorkerScript script) {
    workers_.push_back(std::make_unique<FakeWorker>(id, role, std::move(script)));
    Register(workers_.back()->Info());
    return workers_.back().get();
  }
  void Register(const v1::WorkerInfo& info) {
    v1::RegisterWorkerRequest request;
    *request.mutable_worker() = info;
    ASSERT_TRUE(registry_.Register(request).ok());
  }

  // 4 text tokens, one image at [4, 9), 3 text tokens.
  static GenerationRequest Request(int max_tokens, std::uint64_t content_key = 7) {
    GenerationRequest r;
    r.request_id = "img-1";
    r.prompt_ids = {1, 10, 11, 12, -1, -2, -3, -4, -5, 13, 14, 15};
    r.sampling.set_max_tokens(max_tokens);
    r.deadline = std::chrono::system_clock::now() + std::chrono::seconds(10);
    RequestImage image;
    image.bytes = std::make_shared<const std::string>("not really an image");
    image.position = 4;
    image.rows = kImageRows;
    image.token_id = 99;
    image.content_key = content_key;
    r.images.push_back(image);
    return r;
  }

  absl::StatusOr<GenerationOutcome> RunOnce(std::int64_t covered, CollectingSink* sink,
                                            std::uint64_t content_key = 7) {
    CoveringSelector selector(&registry_, covered);
    absl::StatusOr<WorkerPlan> plan = selector.Select("fake-model", {});
    if (!plan.ok()) return plan.status();
    CallCanceller canceller;
    const GenerationRequest request = Request(3, content_key);
    return async::BlockOn(&executor_, dispatcher_.Run(request, *plan, &canceller, sink));
  }

  absl::StatusOr<GenerationOutcome> RunAdmittedOnce(std::int64_t covered, CollectingSink* sink) {
    CoveringSelector selector(&registry_, covered);
    Admission admission(AdmissionOptions{}, nullptr, &executor_);
    absl::Status refused;
    auto canceller = std::make_shared<CallCanceller>();
    std::unique_ptr<AdmissionTicket> ticket = admission.Admit(canceller, &refused);
    if (ticket == nullptr) return refused;
    RunDeps deps{.selector = &selector,
                 .dispatcher = &dispatcher_,
                 .model = "fake-model",
                 .executor = &executor_};
    const GenerationRequest request = Request(4);
    return async::BlockOn(&executor_,
                          RunAdmitted(deps, ticket.get(), request, canceller.get(), sink));
  }

  async::Executor executor_{2};
  WorkerRegistry registry_{WorkerRegistry::Options{}};
  Dispatcher dispatcher_{&registry_, Dispatcher::Options{.executor = &executor_}};
  FakeEncoder encoder_{"enc", kImageRows};
  std::vector<std::unique_ptr<FakeWorker>> workers_;
};

TEST_F(ImageDispatchTest, AnImageInsideThePrefillsCachedPrefixIsNotEncoded) {
  FakeWorker* p = Add("p", v1::WORKER_ROLE_PREFILL, {.first_token = 50});
  Add("d", v1::WORKER_ROLE_DECODE, {.tokens = {51, 52}});
  CollectingSink sink;
  // Cached up to the image's end (4 + 5 = 9 tokens): no encoder call; the prefill gets the span.
  ASSERT_TRUE(RunOnce(9, &sink).ok());
  EXPECT_EQ(encoder_.encode_calls(), 0);
  ASSERT_EQ(p->last_prefill().images_size(), 1);
  EXPECT_EQ(p->last_prefill().images(0).position(), 4u);
  EXPECT_EQ(p->last_prefill().images(0).rows(), kImageRows);
  EXPECT_TRUE(p->last_prefill().images(0).lease_id().empty());
  EXPECT_EQ(sink.tokens, (std::vector<std::int32_t>{50, 51, 52}));
}

TEST_F(ImageDispatchTest, AnImageReachingPastTheCachedPrefixIsEncoded) {
  FakeWorker* p = Add("p", v1::WORKER_ROLE_PREFILL, {.first_token = 50});
  Add("d", v1::WORKER_ROLE_DECODE, {.tokens = {51, 52}});
  CollectingSink sink;
  ASSERT_TRUE(RunOnce(8, &sink).ok()) << "one row of the image is not cached";
  EXPECT_EQ(encoder_.encode_calls(), 1);
  ASSERT_EQ(p->last_prefill().images_size(), 1);
  EXPECT_FALSE(p->last_prefill().images(0).lease_id().empty());
  EXPECT_FALSE(p->last_prefill().images(0).encoder_endpoint().empty());
}

TEST_F(ImageDispatchTest, APrefillThatLacksTheRowsSaysSoAndTheDecodeReservationIsFreed) {
  Add("p", v1::WORKER_ROLE_PREFILL, {.first_token = 50, .rows_needed_prefills = 1});
  FakeWorker* d = Add("d", v1::WORKER_ROLE_DECODE, {.tokens = {51, 52}});
  CollectingSink sink;
  absl::StatusOr<GenerationOutcome> outcome = RunOnce(9, &sink);
  ASSERT_FALSE(outcome.ok());
  EXPECT_TRUE(IsImageRowsNeeded(outcome.status())) << outcome.status();
  EXPECT_TRUE(sink.tokens.empty());
  EXPECT_TRUE(d->WaitForCall("Cancel img-1", std::chrono::seconds(5)));
}

TEST_F(ImageDispatchTest, BeforeTheFirstTokenTheRequestGoesAgainWithEveryImageEncoded) {
  Add("p", v1::WORKER_ROLE_PREFILL, {.first_token = 50, .rows_needed_prefills = 1});
  Add("d", v1::WORKER_ROLE_DECODE, {.tokens = {51, 52, 53}});
  CollectingSink sink;
  absl::StatusOr<GenerationOutcome> outcome = RunAdmittedOnce(9, &sink);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(encoder_.encode_calls(), 1);
  EXPECT_EQ(sink.tokens, (std::vector<std::int32_t>{50, 51, 52, 53}));
}

TEST_F(ImageDispatchTest, ACombinedWorkerThatLacksTheRowsGetsThemOnTheRetry) {
  FakeWorker* w = Add("c", v1::WORKER_ROLE_COMBINED,
                      {.tokens = {60, 61, 62, 63}, .rows_needed_generates = 1});
  CollectingSink sink;
  absl::StatusOr<GenerationOutcome> outcome = RunAdmittedOnce(9, &sink);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(encoder_.encode_calls(), 1);
  EXPECT_EQ(sink.tokens, (std::vector<std::int32_t>{60, 61, 62, 63}));
  const v1::GenerateRequest& last = w->last_generate();
  EXPECT_NE(last.request_id(), "img-1") << "the retry runs under an id of its own";
  ASSERT_EQ(last.images_size(), 1);
  EXPECT_FALSE(last.images(0).lease_id().empty());
}

TEST_F(ImageDispatchTest, ADecodeThatLosesTheImageMidStreamResumesWithEveryImageEncoded) {
  Add("p", v1::WORKER_ROLE_PREFILL, {.first_token = 50});
  // Its first Generate streams 2 tokens, then asks for rows it cannot have (it holds spans only).
  FakeWorker* d = Add("d", v1::WORKER_ROLE_DECODE,
                      {.tokens = {51, 52, 53}, .rows_needed_generates = 1,
                       .rows_needed_after = 2});
  CollectingSink sink;
  absl::StatusOr<GenerationOutcome> outcome = RunAdmittedOnce(9, &sink);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  // Covered at first: the migration (prompt + 50, 51, 52 resumed) encodes the image.
  EXPECT_EQ(encoder_.encode_calls(), 1);
  const v1::GenerateRequest& last = d->last_generate();
  EXPECT_EQ(last.resumed_tokens(), 3u);
  ASSERT_GE(sink.tokens.size(), 4u);
  EXPECT_EQ(std::vector<std::int32_t>(sink.tokens.begin(), sink.tokens.begin() + 3),
            (std::vector<std::int32_t>{50, 51, 52}));
}

TEST_F(ImageDispatchTest, AnImageKeepsItsEncoderAndImagesSpreadOverTheEncoders) {
  Add("c", v1::WORKER_ROLE_COMBINED, {.tokens = {60, 61, 62}});
  FakeEncoder second("enc-2", kImageRows);
  Register(second.Info());
  CollectingSink sink;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(RunOnce(0, &sink, /*content_key=*/1234).ok());
  EXPECT_TRUE((encoder_.encode_calls() == 3 && second.encode_calls() == 0) ||
              (encoder_.encode_calls() == 0 && second.encode_calls() == 3))
      << "the same image went to both encoders: " << encoder_.encode_calls() << " and "
      << second.encode_calls();
  const int first_before = encoder_.encode_calls(), second_before = second.encode_calls();
  for (std::uint64_t key = 1; key <= 16; ++key) ASSERT_TRUE(RunOnce(0, &sink, key * 7919).ok());
  EXPECT_GT(encoder_.encode_calls(), first_before) << "16 images, none to this encoder";
  EXPECT_GT(second.encode_calls(), second_before) << "16 images, none to this encoder";
}

}  // namespace
}  // namespace tandem::router
