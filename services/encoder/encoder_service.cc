#include "encoder_service.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "tandem/rpc/conversions.h"

namespace tandem::encoder {

using Clock = std::chrono::steady_clock;

absl::string_view DetailName(v1::ImageDetailLevel detail) {
  switch (detail) {
    case v1::IMAGE_DETAIL_LOW: return "low";
    case v1::IMAGE_DETAIL_ORIGINAL: return "original";
    default: return "high";
  }
}

EncoderService::EncoderService(ImageEncoder* encoder, EmbeddingCache* cache,
                               EncoderServiceOptions options, metrics::Histogram* encode_seconds)
    : encoder_(encoder), cache_(cache), options_(options), encode_seconds_(encode_seconds) {}

absl::StatusOr<Embedding> EncoderService::RunTower(const std::string& image,
                                                   v1::ImageDetailLevel detail) {
  {
    absl::MutexLock lock(&mu_);
    if (stats_.encoding >= options_.max_concurrent_encodes &&
        stats_.waiting >= options_.max_waiting_encodes) {
      ++stats_.refused_busy;
      return absl::ResourceExhaustedError(absl::StrCat(
          "encoder busy: ", stats_.encoding, " images encoding and ", stats_.waiting, " waiting"));
    }
    ++stats_.waiting;
    mu_.Await(absl::Condition(
        +[](EncoderService* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu_) {
          return s->stats_.encoding < s->options_.max_concurrent_encodes;
        },
        this));
    --stats_.waiting;
    ++stats_.encoding;
  }
  const auto start = Clock::now();
  absl::StatusOr<Embedding> rows = encoder_->Encode(image, detail);
  if (encode_seconds_ != nullptr) {
    encode_seconds_->Observe(std::chrono::duration<double>(Clock::now() - start).count());
  }
  absl::MutexLock lock(&mu_);
  --stats_.encoding;
  if (!rows.ok()) return rows;
  if (rows->rows <= 0 || rows->hidden <= 0 ||
      rows->data.size() != static_cast<std::size_t>(rows->rows) * rows->hidden) {
    return absl::InternalError(absl::StrCat("the tower returned ", rows->data.size(),
                                            " floats for ", rows->rows, " x ", rows->hidden));
  }
  return rows;
}

grpc::Status EncoderService::EncodeImage(grpc::ServerContext*, const v1::EncodeImageRequest* req,
                                         v1::EncodeImageResponse* resp) {
  auto refuse = [&](absl::Status st) {
    absl::MutexLock lock(&mu_);
    ++stats_.refused_invalid;
    return rpc::ToGrpc(st);
  };
  if (req->version().major() > 1) {
    return refuse(absl::InvalidArgumentError(
        absl::StrCat("unsupported API major version ", req->version().major())));
  }
  if (!v1::ImageDetailLevel_IsValid(req->detail())) {
    return refuse(absl::InvalidArgumentError(absl::StrCat("unknown detail level ", req->detail())));
  }
  if (req->image().size() > options_.max_image_bytes) {
    return refuse(absl::InvalidArgumentError(absl::StrCat(
        "image of ", req->image().size(), " bytes exceeds the limit of ", options_.max_image_bytes)));
  }
  const auto lease = std::chrono::milliseconds(req->lease_ms());
  absl::StatusOr<EmbeddingCache::Pinned> pinned;
  if (req->image().empty()) {
    if (req->content_key().empty()) {
      return refuse(absl::InvalidArgumentError("either image or content_key is required"));
    }
    // NOT_FOUND tells the caller to send the bytes.
    pinned = cache_->Pin(req->content_key(), lease);
  } else {
    const std::string key =
        ContentKey(encoder_->identity(), DetailName(req->detail()), req->image());
    if (!req->content_key().empty() && req->content_key() != key) {
      return refuse(absl::InvalidArgumentError("content_key does not match the image's bytes"));
    }
    pinned = cache_->GetOrCompute(key, lease, [&] { return RunTower(req->image(), req->detail()); });
    if (pinned.ok()) resp->set_content_key(key);
  }
  if (!pinned.ok()) return rpc::ToGrpc(pinned.status());
  if (resp->content_key().empty()) resp->set_content_key(req->content_key());
  const Embedding& e = *pinned->embedding;
  resp->set_lease_id(pinned->lease_id);
  resp->set_rows(static_cast<std::uint32_t>(e.rows));
  resp->set_hidden(static_cast<std::uint32_t>(e.hidden));
  resp->set_width(static_cast<std::uint32_t>(e.width));
  resp->set_height(static_cast<std::uint32_t>(e.height));
  resp->set_cache_hit(pinned->hit);
  absl::MutexLock lock(&mu_);
  ++stats_.images;
  return grpc::Status::OK;
}

grpc::Status EncoderService::FetchEmbeddings(grpc::ServerContext* ctx,
                                             const v1::FetchEmbeddingsRequest* req,
                                             grpc::ServerWriter<v1::EmbeddingChunk>* writer) {
  auto leased = cache_->Leased(req->lease_id());
  if (!leased.ok()) return rpc::ToGrpc(leased.status());
  // The lease keeps the entry in the cache; the shared_ptr keeps the rows alive even if the
  // lease expires mid-stream.
  const Embedding& e = **leased;
  const std::size_t row_bytes = static_cast<std::size_t>(e.hidden) * sizeof(float);
  std::size_t chunk_bytes = req->max_chunk_bytes() == 0 ? options_.default_chunk_bytes
                                                        : req->max_chunk_bytes();
  chunk_bytes = std::min(chunk_bytes, options_.max_chunk_bytes);
  const int rows_per_chunk = static_cast<int>(std::max<std::size_t>(1, chunk_bytes / row_bytes));
  std::uint64_t sent = 0;
  for (int first = 0; first < e.rows; first += rows_per_chunk) {
    if (ctx->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "fetch cancelled");
    const int n = std::min(rows_per_chunk, e.rows - first);
    v1::EmbeddingChunk chunk;
    chunk.set_first_row(static_cast<std::uint32_t>(first));
    chunk.set_rows(static_cast<std::uint32_t>(n));
    chunk.set_total_rows(static_cast<std::uint32_t>(e.rows));
    chunk.set_hidden(static_cast<std::uint32_t>(e.hidden));
    // Little-endian on every platform tandem builds for (x86-64, aarch64).
    chunk.set_data(reinterpret_cast<const char*>(e.data.data() + static_cast<std::size_t>(first) * e.hidden),
                   static_cast<std::size_t>(n) * row_bytes);
    if (!writer->Write(chunk)) return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
    sent += chunk.data().size();
  }
  absl::MutexLock lock(&mu_);
  ++stats_.fetches;
  stats_.fetched_bytes += sent;
  return grpc::Status::OK;
}

grpc::Status EncoderService::ReleaseEmbeddings(grpc::ServerContext*,
                                               const v1::ReleaseEmbeddingsRequest* req,
                                               v1::ReleaseEmbeddingsResponse* resp) {
  resp->set_released(cache_->Release(req->lease_id()));
  return grpc::Status::OK;
}

EncoderServiceStats EncoderService::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace tandem::encoder
