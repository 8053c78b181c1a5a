// A prefill worker pulls image rows from a real encoder service over gRPC: exact rows across
// chunks, refusals for rows that do not fit the model or the request, the lease released once
// the rows are here, and a dead encoder failing the call within its deadline.
#include "image_rows_fetcher.h"

#include <chrono>
#include <memory>
#include <thread>

#include "encoder_service.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"

namespace tandem::worker {
namespace {

using std::chrono::milliseconds;

// `rows` rows of `hidden` floats: row r holds r * 10 + column.
class CountingTower : public encoder::ImageEncoder {
 public:
  CountingTower(int rows, int hidden) : rows_(rows), hidden_(hidden) {}
  const encoder::EncodingIdentity& identity() const override { return identity_; }
  absl::StatusOr<encoder::Embedding> Encode(absl::string_view, v1::ImageDetailLevel) override {
    encoder::Embedding e;
    e.rows = rows_;
    e.hidden = hidden_;
    for (int r = 0; r < rows_; ++r) {
      for (int h = 0; h < hidden_; ++h) e.data.push_back(static_cast<float>(r * 10 + h));
    }
    return e;
  }

 private:
  int rows_, hidden_;
  encoder::EncodingIdentity identity_{"w", "p"};
};

class ImageRowsFetcherTest : public ::testing::Test {
 protected:
  void StartEncoder(int rows, int hidden) {
    tower_ = std::make_unique<CountingTower>(rows, hidden);
    cache_ = std::make_unique<encoder::EmbeddingCache>(encoder::EmbeddingCacheOptions{});
    encoder::EncoderServiceOptions options;
    service_ = std::make_unique<encoder::EncoderService>(tower_.get(), cache_.get(), options);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(port_, 0);
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  // What the router does before a prefill: the image encoded and pinned under a lease.
  v1::PromptImage Encoded(int position) {
    grpc::ServerContext ctx;
    v1::EncodeImageRequest req;
    req.set_image("bytes");
    v1::EncodeImageResponse resp;
    EXPECT_TRUE(service_->EncodeImage(&ctx, &req, &resp).ok());
    v1::PromptImage image;
    image.set_position(position);
    image.set_rows(resp.rows());
    image.set_token_id(7);
    image.set_encoder_endpoint("127.0.0.1:" + std::to_string(port_));
    image.set_lease_id(resp.lease_id());
    image.set_content_key(resp.content_key());
    return image;
  }

  static std::chrono::system_clock::time_point Soon() {
    return std::chrono::system_clock::now() + std::chrono::seconds(10);
  }

  std::unique_ptr<CountingTower> tower_;
  std::unique_ptr<encoder::EmbeddingCache> cache_;
  std::unique_ptr<encoder::EncoderService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

TEST_F(ImageRowsFetcherTest, RowsArriveExactlyAcrossChunksAndTheLeaseIsReleased) {
  // 300 rows of 1024 floats: 1.2 MB, more than one 1 MiB chunk.
  StartEncoder(300, 1024);
  google::protobuf::RepeatedPtrField<v1::PromptImage> images;
  *images.Add() = Encoded(5);
  ImageRowsFetcher fetcher(1024, {});
  auto got = fetcher.Resolve(images, /*fetch_rows=*/true, Soon());
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 1u);
  const engine::InputImage& in = (*got)[0];
  EXPECT_EQ(in.position, 5);
  EXPECT_EQ(in.rows, 300);
  EXPECT_EQ(in.token_id, 7);
  ASSERT_NE(in.data, nullptr);
  ASSERT_EQ(in.data->size(), 300u * 1024);
  EXPECT_EQ((*in.data)[299 * 1024 + 1023], 299 * 10 + 1023);
  // Released asynchronously once the rows are here.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (cache_->stats().leases > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  EXPECT_EQ(cache_->stats().leases, 0u);
}

TEST_F(ImageRowsFetcherTest, SpansOnlyForAHandoffFetchNothing) {
  StartEncoder(4, 8);
  google::protobuf::RepeatedPtrField<v1::PromptImage> images;
  *images.Add() = Encoded(0);
  ImageRowsFetcher fetcher(8, {});
  auto got = fetcher.Resolve(images, /*fetch_rows=*/false, Soon());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)[0].data, nullptr);
  EXPECT_EQ(cache_->stats().leases, 1u);  // still pinned: nobody fetched
}

TEST_F(ImageRowsFetcherTest, RowsThatDoNotFitTheModelOrTheRequestAreRefused) {
  StartEncoder(4, 8);
  ImageRowsFetcher wrong_hidden(16, {});
  google::protobuf::RepeatedPtrField<v1::PromptImage> images;
  *images.Add() = Encoded(0);
  EXPECT_EQ(wrong_hidden.Resolve(images, true, Soon()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  ImageRowsFetcher fetcher(8, {});
  images.Mutable(0)->set_rows(5);  // the request claims more rows than the encoder holds
  EXPECT_EQ(fetcher.Resolve(images, true, Soon()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  images.Mutable(0)->set_rows(0);
  EXPECT_EQ(fetcher.Resolve(images, true, Soon()).status().code(),
            absl::StatusCode::kInvalidArgument);
  images.Mutable(0)->set_rows(4);
  images.Mutable(0)->set_lease_id("no-such-lease");
  // A lease the encoder does not hold (it expired): the images must be encoded again.
  EXPECT_TRUE(ImageRowsLost(fetcher.Resolve(images, true, Soon()).status()));
}

TEST_F(ImageRowsFetcherTest, ADeadEncoderFailsTheCallWithinItsDeadline) {
  StartEncoder(4, 8);
  google::protobuf::RepeatedPtrField<v1::PromptImage> images;
  *images.Add() = Encoded(0);
  server_->Shutdown();
  server_.reset();
  ImageRowsFetcher fetcher(8, {});
  const auto start = std::chrono::steady_clock::now();
  auto got = fetcher.Resolve(images, true, std::chrono::system_clock::now() + milliseconds(1500));
  EXPECT_FALSE(got.ok());
  EXPECT_TRUE(ImageRowsLost(got.status()))
      << "a dead encoder is not the worker's failure: the router must encode again, not mark "
         "this worker down; got "
      << got.status();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

}  // namespace
}  // namespace tandem::worker
