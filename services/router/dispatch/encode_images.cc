// The encoder step of a generation with images (Dispatcher::EncodeImages).
#include <algorithm>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "async/event.h"
#include "dispatch/dispatcher.h"
#include "tandem/base/hash.h"
#include "tandem/image/errors.h"
#include "tandem/rpc/conversions.h"
#include "tandem/v1/encoder.grpc.pb.h"

namespace tandem::router {
namespace {

// One EncodeImage in flight; lives in the coroutine's frame until its callback ran.
struct EncodeCall {
  std::shared_ptr<WorkerEntry> encoder;
  std::unique_ptr<v1::Encoder::Stub> stub;
  grpc::ClientContext ctx;
  v1::EncodeImageRequest request;
  v1::EncodeImageResponse response;
  grpc::Status status;
  std::shared_ptr<async::Event> done;
  std::unique_ptr<CallCanceller::Scope> scope;  // the client leaving cancels the call
};

// Encoders in the order an image tries them: highest random weight (rendezvous) hashing of the
// image's content key with each encoder's id. Every router orders them alike, an image keeps its
// encoder (and that encoder's cached rows) while the pool is unchanged, a retry goes to the
// image's next encoder, and a change of pool moves only the images of the encoders that came or
// went.
std::vector<const WorkerView*> EncoderOrder(std::uint64_t content_key,
                                            const std::vector<WorkerView>& encoders) {
  std::vector<std::pair<std::uint64_t, const WorkerView*>> scored;
  scored.reserve(encoders.size());
  for (const WorkerView& encoder : encoders) {
    const std::string& id = encoder.entry->id();
    const std::uint64_t weight = StableHash64(
        std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(id.data()), id.size()),
        content_key);
    scored.emplace_back(weight, &encoder);
  }
  std::sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second->entry->id() < b.second->entry->id();
  });
  std::vector<const WorkerView*> order;
  order.reserve(scored.size());
  for (const auto& [weight, encoder] : scored) order.push_back(encoder);
  return order;
}

// Where an image sits in the prompt, naming no rows yet.
v1::PromptImage ImageSpan(const RequestImage& image) {
  v1::PromptImage span;
  span.set_position(image.position);
  span.set_rows(image.rows);
  span.set_token_id(image.token_id);
  return span;
}

// Worth another encoder: it is gone, busy or out of cache. Anything else (the image itself is
// bad, the deadline passed) is the request's answer.
bool TryAnotherEncoder(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::RESOURCE_EXHAUSTED ||
         code == grpc::StatusCode::ABORTED || code == grpc::StatusCode::INTERNAL ||
         code == grpc::StatusCode::UNKNOWN;
}

}  // namespace

async::Task<absl::StatusOr<std::vector<v1::PromptImage>>> Dispatcher::EncodeImages(
    const GenerationRequest& request, const std::string& model, std::int64_t cached_tokens,
    CallCanceller* canceller) {
  const std::size_t n = request.images.size();
  std::vector<v1::PromptImage> out(n);
  std::vector<bool> done(n, false);
  std::size_t remaining = n;
  for (std::size_t i = 0; i < n; ++i) {
    const RequestImage& image = request.images[i];
    const std::int64_t end = static_cast<std::int64_t>(image.position) + image.rows;
    // The last prompt token is always computed, so an image reaching it is never covered.
    if (request.encode_every_image || end > cached_tokens ||
        end >= static_cast<std::int64_t>(request.prompt_ids.size())) {
      continue;
    }
    out[i] = ImageSpan(image);
    done[i] = true;
    --remaining;
    if (options_.metrics != nullptr) options_.metrics->images_cache_covered->Increment();
  }
  if (remaining == 0) co_return out;
  std::vector<WorkerView> encoders = registry_->Healthy(model, v1::WORKER_ROLE_ENCODER);
  if (encoders.empty()) {
    co_return absl::UnavailableError(
        absl::StrCat("no healthy vision encoder serves ", model, ": images cannot be read now"));
  }
  std::vector<std::vector<const WorkerView*>> order(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (!done[i]) order[i] = EncoderOrder(request.images[i].content_key, encoders);
  }
  std::vector<std::size_t> attempts(n, 0);
  std::vector<std::string> last_error(n);
  while (remaining > 0) {
    // Every image not yet encoded goes out at once.
    // Checked before any call of the round starts: a call in flight must be awaited.
    for (std::size_t i = 0; i < n; ++i) {
      if (!done[i] && attempts[i] >= encoders.size()) {
        co_return absl::UnavailableError(absl::StrCat(
            "every vision encoder failed image ", i, " of this request; the last said: ",
            last_error[i]));
      }
    }
    std::vector<std::unique_ptr<EncodeCall>> calls(n);
    for (std::size_t i = 0; i < n; ++i) {
      if (done[i]) continue;
      ++attempts[i];
      const RequestImage& image = request.images[i];
      auto call = std::make_unique<EncodeCall>();
      // Image i's k-th attempt goes to its k-th encoder: a retry never returns to an encoder
      // this image already tried.
      call->encoder = order[i][attempts[i] - 1]->entry;
      call->stub = v1::Encoder::NewStub(call->encoder->channel());
      call->ctx.set_deadline(request.deadline);
      *call->request.mutable_version() = rpc::CurrentVersion();
      call->request.set_request_id(request.request_id);
      call->request.set_image(*image.bytes);
      call->request.set_detail(image.detail);
      call->done = async::Event::Create(options_.executor);
      call->scope = std::make_unique<CallCanceller::Scope>(canceller, &call->ctx);
      EncodeCall* raw = call.get();
      raw->stub->async()->EncodeImage(&raw->ctx, &raw->request, &raw->response,
                                      [raw](grpc::Status st) {
                                        raw->status = std::move(st);
                                        std::shared_ptr<async::Event> notify = raw->done;
                                        notify->Notify();
                                      });
      calls[i] = std::move(call);
    }
    absl::Status failure;
    for (std::size_t i = 0; i < n; ++i) {
      if (calls[i] == nullptr) continue;
      co_await calls[i]->done->Wait();
      calls[i]->scope.reset();
      const grpc::Status& st = calls[i]->status;
      const RequestImage& image = request.images[i];
      if (st.ok()) {
        const v1::EncodeImageResponse& r = calls[i]->response;
        if (r.rows() != image.rows) {
          // The prompt reserved image.rows positions: another count would misalign it.
          failure.Update(absl::InternalError(absl::StrCat(
              "encoder ", calls[i]->encoder->id(), " made ", r.rows(), " rows of image ", i,
              ", the prompt holds ", image.rows)));
          continue;
        }
        v1::PromptImage& p = out[i];
        p = ImageSpan(image);
        p.set_encoder_endpoint(calls[i]->encoder->info().grpc_endpoint());
        p.set_lease_id(r.lease_id());
        p.set_content_key(r.content_key());
        done[i] = true;
        --remaining;
      } else if (canceller->cancelled()) {
        failure.Update(canceller->reason());
      } else if (st.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
        // The image itself: recipe's message, located as recipe locates it.
        failure.Update(image::WithImageLocation(
            image::ImageError(image::ImageErrorKind::kDecode), image.path, image.index));
      } else if (!TryAnotherEncoder(st.error_code())) {
        failure.Update(rpc::FromGrpc(st));
      } else {
        last_error[i] = absl::StrCat(calls[i]->encoder->id(), ": ", st.error_message());
      }
    }
    if (!failure.ok()) co_return failure;
  }
  co_return out;
}

}  // namespace tandem::router
