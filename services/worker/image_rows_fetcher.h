#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "tandem/engine/engine.h"
#include "tandem/security/tls.h"
#include "tandem/v1/encoder.grpc.pb.h"
#include "tandem/v1/worker.pb.h"

namespace tandem::worker {

// Pulls a prompt's image rows from the encoders that hold them (chunked gRPC over the
// authenticated control plane), checks them against what the request says and the model
// needs, and releases the encoders' leases once the rows are here. Thread-safe; one channel per
// encoder, kept.
// Resolve's error when an image's rows can no longer be had where the router said (the encoder
// died, or its lease ran out while the request waited): not this worker's fault nor the
// request's; the router encodes the images again (rpc::kImageRowsNeededTrailer) instead of
// taking this worker for lost.
bool ImageRowsLost(const absl::Status& status);

class ImageRowsFetcher {
 public:
  // `hidden_size`: floats per row the model takes. `tls`: how encoders are dialled (their
  // certificates must carry `tls.server_name` when set).
  ImageRowsFetcher(int hidden_size, security::TlsConfig tls);

  // The images as the engine takes them; with `fetch_rows` false only the spans (a decode
  // worker that received the prompt's KV), and only spans for images that name no encoder (the
  // router expects the prefix cache to cover them). Checks order, bounds against `prompt_size`
  // and the placeholders are left to the engine.
  absl::StatusOr<std::vector<engine::InputImage>> Resolve(
      const google::protobuf::RepeatedPtrField<v1::PromptImage>& images, bool fetch_rows,
      std::chrono::system_clock::time_point deadline);

 private:
  absl::StatusOr<std::shared_ptr<const std::vector<float>>> FetchRows(
      const v1::PromptImage& image, std::chrono::system_clock::time_point deadline);
  void ReleaseLease(const v1::PromptImage& image);
  v1::Encoder::Stub* StubFor(const std::string& endpoint);

  const int hidden_size_;
  const security::TlsConfig tls_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<v1::Encoder::Stub>> stubs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem::worker
