#include "image_rows_fetcher.h"

#include <cstring>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "tandem/rpc/conversions.h"

namespace tandem::worker {

constexpr char kRowsLostPayload[] = "tandem.dev/image-rows-lost";

bool ImageRowsLost(const absl::Status& status) {
  return status.GetPayload(kRowsLostPayload).has_value();
}

// Rows of one chunk: a few MiB; the encoder caps it too.
constexpr std::uint32_t kChunkBytes = 1u << 20;
// A prompt's image positions beyond any real context (V4's is 1M tokens): a bound on what a
// malformed request can make this worker allocate before the engine checks the prompt.
constexpr std::uint64_t kMaxRowsPerImage = 1u << 20;

ImageRowsFetcher::ImageRowsFetcher(int hidden_size, security::TlsConfig tls)
    : hidden_size_(hidden_size), tls_(std::move(tls)) {}

v1::Encoder::Stub* ImageRowsFetcher::StubFor(const std::string& endpoint) {
  absl::MutexLock lock(&mu_);
  auto& stub = stubs_[endpoint];
  if (stub == nullptr) stub = v1::Encoder::NewStub(security::CreateChannel(endpoint, tls_));
  return stub.get();
}

absl::StatusOr<std::shared_ptr<const std::vector<float>>> ImageRowsFetcher::FetchRows(
    const v1::PromptImage& image, std::chrono::system_clock::time_point deadline) {
  if (image.encoder_endpoint().empty() || image.lease_id().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "image at ", image.position(), " names no encoder or lease to fetch its rows from"));
  }
  const std::size_t expected = static_cast<std::size_t>(image.rows()) * hidden_size_;
  auto rows = std::make_shared<std::vector<float>>();
  rows->reserve(expected);
  grpc::ClientContext ctx;
  ctx.set_deadline(deadline);
  v1::FetchEmbeddingsRequest req;
  req.mutable_version()->set_major(1);
  req.set_lease_id(image.lease_id());
  req.set_max_chunk_bytes(kChunkBytes);
  auto reader = StubFor(image.encoder_endpoint())->FetchEmbeddings(&ctx, req);
  v1::EmbeddingChunk chunk;
  absl::Status bad;
  while (bad.ok() && reader->Read(&chunk)) {
    const std::size_t floats = chunk.data().size() / sizeof(float);
    if (chunk.total_rows() != image.rows() || chunk.hidden() != static_cast<std::uint32_t>(hidden_size_) ||
        static_cast<std::size_t>(chunk.first_row()) * hidden_size_ != rows->size() ||
        chunk.data().size() % sizeof(float) != 0 ||
        floats != static_cast<std::size_t>(chunk.rows()) * hidden_size_ ||
        rows->size() + floats > expected) {
      bad = absl::FailedPreconditionError(absl::StrCat(
          "encoder ", image.encoder_endpoint(), " sent rows that do not fit image at ",
          image.position(), " (", image.rows(), " rows of ", hidden_size_, "; got a chunk of ",
          chunk.rows(), " rows of ", chunk.hidden(), " at row ", chunk.first_row(), " of ",
          chunk.total_rows(), ")"));
      ctx.TryCancel();
      break;
    }
    const std::size_t at = rows->size();
    rows->resize(at + floats);
    std::memcpy(rows->data() + at, chunk.data().data(), chunk.data().size());
  }
  grpc::Status finished = reader->Finish();
  if (!bad.ok()) return bad;
  if (!finished.ok()) {
    absl::Status lost = absl::FailedPreconditionError(absl::StrCat(
        "image rows from ", image.encoder_endpoint(), ": ", finished.error_message()));
    lost.SetPayload(kRowsLostPayload, absl::Cord("1"));
    return lost;
  }
  if (rows->size() != expected) {
    return absl::FailedPreconditionError(absl::StrCat("encoder ", image.encoder_endpoint(),
                                                      " sent ", rows->size(), " floats, image at ",
                                                      image.position(), " needs ", expected));
  }
  return rows;
}

void ImageRowsFetcher::ReleaseLease(const v1::PromptImage& image) {
  // Best effort, briefly: the lease expires on its own if this is lost.
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
  v1::ReleaseEmbeddingsRequest req;
  req.set_lease_id(image.lease_id());
  v1::ReleaseEmbeddingsResponse resp;
  StubFor(image.encoder_endpoint())->ReleaseEmbeddings(&ctx, req, &resp).IgnoreError();
}

absl::StatusOr<std::vector<engine::InputImage>> ImageRowsFetcher::Resolve(
    const google::protobuf::RepeatedPtrField<v1::PromptImage>& images, bool fetch_rows,
    std::chrono::system_clock::time_point deadline) {
  std::vector<engine::InputImage> out;
  out.reserve(images.size());
  for (const v1::PromptImage& image : images) {
    if (image.rows() == 0 || image.rows() > kMaxRowsPerImage) {
      return absl::InvalidArgumentError(
          absl::StrCat("image at ", image.position(), " has ", image.rows(), " rows"));
    }
    engine::InputImage in{static_cast<int>(image.position()), static_cast<int>(image.rows()),
                          image.token_id(), nullptr};
    // An image named by span alone is one the router expects this worker's prefix cache to
    // cover: the engine asks for its rows (image_rows_missing) only if it must compute it.
    const bool sent_rows = !image.encoder_endpoint().empty() || !image.lease_id().empty();
    if (fetch_rows && sent_rows) {
      auto rows = FetchRows(image, deadline);
      if (!rows.ok()) return rows.status();
      in.data = std::move(*rows);
      ReleaseLease(image);
    }
    out.push_back(std::move(in));
  }
  return out;
}

}  // namespace tandem::worker
