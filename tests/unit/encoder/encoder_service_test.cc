#include "encoder_service.h"

#include <atomic>
#include <memory>
#include <thread>

#include "absl/synchronization/notification.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"

namespace tandem::encoder {
namespace {

// Rows derived from the bytes and the detail, so a test can tell whose rows it got back.
class FakeEncoder : public ImageEncoder {
 public:
  const EncodingIdentity& identity() const override { return identity_; }
  absl::StatusOr<Embedding> Encode(absl::string_view bytes, v1::ImageDetailLevel detail) override {
    ++calls;
    if (gate != nullptr) gate->WaitForNotification();
    if (bytes == "corrupt") return absl::InvalidArgumentError("Invalid image data");
    Embedding e;
    e.rows = static_cast<int>(bytes.size()) + (detail == v1::IMAGE_DETAIL_LOW ? 0 : 10);
    e.hidden = 3;
    e.width = 28;
    e.height = 14;
    for (int r = 0; r < e.rows; ++r) {
      for (int h = 0; h < e.hidden; ++h) e.data.push_back(static_cast<float>(r * 100 + h) + bytes[0]);
    }
    return e;
  }
  std::atomic<int> calls{0};
  absl::Notification* gate = nullptr;

 private:
  EncodingIdentity identity_{"fake-weights", "fake-pre"};
};

class EncoderServiceTest : public ::testing::Test {
 protected:
  void Start(EncoderServiceOptions options = {}) {
    cache_ = std::make_unique<EmbeddingCache>(EmbeddingCacheOptions{});
    service_ = std::make_unique<EncoderService>(&encoder_, cache_.get(), options);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(port, 0);
    stub_ = v1::Encoder::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  grpc::Status Encode(const std::string& image, v1::ImageDetailLevel detail,
                      v1::EncodeImageResponse* resp, const std::string& key = "") {
    grpc::ClientContext ctx;
    v1::EncodeImageRequest req;
    req.set_image(image);
    req.set_detail(detail);
    req.set_content_key(key);
    return stub_->EncodeImage(&ctx, req, resp);
  }

  grpc::Status Fetch(const std::string& lease, std::uint32_t chunk_bytes, std::vector<float>* rows,
                     int* chunks) {
    grpc::ClientContext ctx;
    v1::FetchEmbeddingsRequest req;
    req.set_lease_id(lease);
    req.set_max_chunk_bytes(chunk_bytes);
    auto reader = stub_->FetchEmbeddings(&ctx, req);
    v1::EmbeddingChunk chunk;
    *chunks = 0;
    while (reader->Read(&chunk)) {
      ++*chunks;
      EXPECT_EQ(chunk.first_row() * chunk.hidden(), rows->size());
      const auto* f = reinterpret_cast<const float*>(chunk.data().data());
      rows->insert(rows->end(), f, f + chunk.data().size() / sizeof(float));
    }
    return reader->Finish();
  }

  FakeEncoder encoder_;
  std::unique_ptr<EmbeddingCache> cache_;
  std::unique_ptr<EncoderService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Encoder::Stub> stub_;
};

TEST_F(EncoderServiceTest, TheSameImageAgainIsServedFromTheCacheAndFetchesTheSameRows) {
  Start();
  v1::EncodeImageResponse first, second, low;
  ASSERT_TRUE(Encode("png-bytes", v1::IMAGE_DETAIL_HIGH, &first).ok());
  ASSERT_TRUE(Encode("png-bytes", v1::IMAGE_DETAIL_HIGH, &second).ok());
  EXPECT_FALSE(first.cache_hit());
  EXPECT_TRUE(second.cache_hit());
  EXPECT_EQ(first.content_key(), second.content_key());
  EXPECT_EQ(encoder_.calls.load(), 1);
  // Another detail level is another encoding.
  ASSERT_TRUE(Encode("png-bytes", v1::IMAGE_DETAIL_LOW, &low).ok());
  EXPECT_NE(low.content_key(), first.content_key());
  EXPECT_EQ(encoder_.calls.load(), 2);
  EXPECT_EQ(first.rows(), 19u);
  EXPECT_EQ(low.rows(), 9u);

  std::vector<float> a, b;
  int chunks_a = 0, chunks_b = 0;
  ASSERT_TRUE(Fetch(first.lease_id(), 4 * 3 * sizeof(float), &a, &chunks_a).ok());
  ASSERT_TRUE(Fetch(second.lease_id(), 0, &b, &chunks_b).ok());
  EXPECT_EQ(chunks_a, 5);  // 19 rows, 4 per chunk
  EXPECT_EQ(chunks_b, 1);
  EXPECT_EQ(a, b);
  ASSERT_EQ(a.size(), 19u * 3);
  EXPECT_EQ(a[3 * 7 + 2], 702.0f + 'p');
}

TEST_F(EncoderServiceTest, ALeaseEndsOnReleaseAndAKeyAloneRepinsCachedRows) {
  Start();
  v1::EncodeImageResponse enc;
  ASSERT_TRUE(Encode("jpeg", v1::IMAGE_DETAIL_HIGH, &enc).ok());
  grpc::ClientContext ctx;
  v1::ReleaseEmbeddingsRequest rel;
  rel.set_lease_id(enc.lease_id());
  v1::ReleaseEmbeddingsResponse rel_resp;
  ASSERT_TRUE(stub_->ReleaseEmbeddings(&ctx, rel, &rel_resp).ok());
  EXPECT_TRUE(rel_resp.released());
  std::vector<float> rows;
  int chunks = 0;
  EXPECT_EQ(Fetch(enc.lease_id(), 0, &rows, &chunks).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(cache_->stats().leases, 0u);

  v1::EncodeImageResponse again;
  ASSERT_TRUE(Encode("", v1::IMAGE_DETAIL_HIGH, &again, enc.content_key()).ok());
  EXPECT_TRUE(again.cache_hit());
  EXPECT_EQ(again.rows(), enc.rows());
  EXPECT_EQ(encoder_.calls.load(), 1);
  v1::EncodeImageResponse unknown;
  EXPECT_EQ(Encode("", v1::IMAGE_DETAIL_HIGH, &unknown, std::string(64, 'a')).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(EncoderServiceTest, BadRequestsAreRefusedWithoutRunningTheTowerOrLeavingState) {
  EncoderServiceOptions options;
  options.max_image_bytes = 16;
  Start(options);
  v1::EncodeImageResponse resp;
  EXPECT_EQ(Encode("", v1::IMAGE_DETAIL_HIGH, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Encode(std::string(17, 'x'), v1::IMAGE_DETAIL_HIGH, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Encode("ok", static_cast<v1::ImageDetailLevel>(99), &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Encode("ok", v1::IMAGE_DETAIL_HIGH, &resp, std::string(64, 'b')).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(encoder_.calls.load(), 0);
  // The intake's refusal reaches the caller with its message, and nothing is cached.
  grpc::Status corrupt = Encode("corrupt", v1::IMAGE_DETAIL_HIGH, &resp);
  EXPECT_EQ(corrupt.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(corrupt.error_message(), "Invalid image data");
  const auto s = cache_->stats();
  EXPECT_EQ(s.entries, 0u);
  EXPECT_EQ(s.leases, 0u);
}

TEST_F(EncoderServiceTest, ABacklogPastTheWaitingBoundIsRefusedSoTheRouterTriesElsewhere) {
  EncoderServiceOptions options;
  options.max_concurrent_encodes = 1;
  options.max_waiting_encodes = 0;
  Start(options);
  absl::Notification gate;
  encoder_.gate = &gate;
  v1::EncodeImageResponse slow;
  grpc::Status slow_status;
  std::thread t([&] { slow_status = Encode("first", v1::IMAGE_DETAIL_HIGH, &slow); });
  while (service_->stats().encoding < 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  v1::EncodeImageResponse busy;
  grpc::Status refused = Encode("second", v1::IMAGE_DETAIL_HIGH, &busy);
  gate.Notify();
  t.join();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(slow_status.ok()) << slow_status.error_message();
  EXPECT_EQ(service_->stats().refused_busy, 1u);
}

}  // namespace
}  // namespace tandem::encoder
