#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "absl/synchronization/mutex.h"
#include "embedding_cache.h"
#include "image_encoder.h"
#include "tandem/metrics/histogram.h"
#include "tandem/v1/encoder.grpc.pb.h"

namespace tandem::encoder {

struct EncoderServiceOptions {
  std::size_t max_image_bytes = 20u << 20;
  // Tower runs at once (each uses the compute threads), and how many more may wait for one;
  // past that a request is refused RESOURCE_EXHAUSTED so the router tries another encoder
  // instead of queueing behind a backlog here.
  int max_concurrent_encodes = 1;
  int max_waiting_encodes = 64;
  std::size_t default_chunk_bytes = 1u << 20;
  std::size_t max_chunk_bytes = 4u << 20;
};

struct EncoderServiceStats {
  std::uint64_t images = 0;          // EncodeImage calls that returned rows
  std::uint64_t refused_invalid = 0;
  std::uint64_t refused_busy = 0;
  std::uint64_t fetches = 0;
  std::uint64_t fetched_bytes = 0;
  int encoding = 0;                  // tower runs in progress
  int waiting = 0;
};

class EncoderService final : public v1::Encoder::Service {
 public:
  // `encode_seconds` may be null; otherwise every tower run is observed into it.
  EncoderService(ImageEncoder* encoder, EmbeddingCache* cache, EncoderServiceOptions options,
                 metrics::Histogram* encode_seconds = nullptr);

  grpc::Status EncodeImage(grpc::ServerContext* ctx, const v1::EncodeImageRequest* req,
                           v1::EncodeImageResponse* resp) override;
  grpc::Status FetchEmbeddings(grpc::ServerContext* ctx, const v1::FetchEmbeddingsRequest* req,
                               grpc::ServerWriter<v1::EmbeddingChunk>* writer) override;
  grpc::Status ReleaseEmbeddings(grpc::ServerContext* ctx,
                                 const v1::ReleaseEmbeddingsRequest* req,
                                 v1::ReleaseEmbeddingsResponse* resp) override;

  EncoderServiceStats stats() const;

 private:
  absl::StatusOr<Embedding> RunTower(const std::string& image, v1::ImageDetailLevel detail);

  ImageEncoder* const encoder_;
  EmbeddingCache* const cache_;
  const EncoderServiceOptions options_;
  metrics::Histogram* const encode_seconds_;
  mutable absl::Mutex mu_;
  EncoderServiceStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem::encoder
