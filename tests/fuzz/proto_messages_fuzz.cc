// Every protobuf message a router or worker accepts, parsed from arbitrary bytes, and the
// service-side code that takes it where that runs without a server: the router's registry and
// routing core (WorkerRegistry::Register/Heartbeat, PrefixRouter::OnRegistered/OnHeartbeat/
// OnEvents: the KV index fed by worker events), the worker's version check, the sampling
// conversion and its range checks, and traffic-class parsing. Input: records of a type byte, a
// 2-byte little-endian length and that many bytes; state carries over between the records of one
// input, as on one router.
#include <chrono>
#include <cstdint>
#include <memory>

#include "fuzz_util.h"
#include "workers/prefix_router.h"
#include "tandem/engine/sampling.h"
#include "tandem/kv/types.h"
#include "tandem/rpc/conversions.h"
#include "tandem/v1/router_control.pb.h"
#include "tandem/v1/worker.pb.h"
#include "workers/worker_registry.h"

namespace {

namespace v1 = tandem::v1;
using tandem::router::PrefixRouter;
using tandem::router::WorkerRegistry;

// What a worker handler checks before it touches the engine.
void CheckWorkerRequest(const v1::ApiVersion& version, const v1::SamplingParams& sampling,
                        const std::string& traffic_class) {
  (void)tandem::rpc::CheckVersion(version);
  (void)tandem::engine::ValidateSamplingParams(tandem::rpc::FromProto(sampling), 512);
  if (!traffic_class.empty()) (void)tandem::kv::ParseTrafficClass(traffic_class);
}

template <typename Message>
bool Parse(absl::string_view bytes, Message* message) {
  return message->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
}

class Router {
 public:
  Router() {
    WorkerRegistry::Options registry_options;
    registry_options.now = [this] { return now_; };
    registry_ = std::make_unique<WorkerRegistry>(registry_options);
    PrefixRouter::Options routing_options;
    routing_options.max_index_blocks = 4096;  // small, so eviction runs too
    routing_options.now = [this] { return now_; };
    auto routing = PrefixRouter::Create(routing_options);
    if (!routing.ok()) __builtin_trap();
    routing_ = std::move(*routing);
  }

  void Accept(int type, absl::string_view bytes) {
    now_ += std::chrono::milliseconds(700);
    switch (type) {
      case 0: {
        v1::RegisterWorkerRequest r;
        if (!Parse(bytes, &r)) return;
        if (registry_->Register(r).ok()) (void)routing_->OnRegistered(r.worker());
        return;
      }
      case 1: {
        v1::HeartbeatRequest r;
        if (!Parse(bytes, &r)) return;
        if (!registry_->Heartbeat(r).reregister()) (void)routing_->OnHeartbeat(r);
        return;
      }
      case 2: {
        v1::KvEventBatch r;
        if (Parse(bytes, &r)) (void)routing_->OnEvents(r);
        return;
      }
      case 3: {
        v1::ReserveKvRequest r;
        if (Parse(bytes, &r)) (void)tandem::rpc::CheckVersion(r.version());
        return;
      }
      case 4: {
        v1::PrefillRequest r;
        if (Parse(bytes, &r)) CheckWorkerRequest(r.version(), r.sampling(), r.traffic_class());
        return;
      }
      case 5: {
        v1::GenerateRequest r;
        if (Parse(bytes, &r)) CheckWorkerRequest(r.version(), r.sampling(), r.traffic_class());
        return;
      }
      case 6: {
        v1::GenerateResponse r;  // the router reads finish reasons off the stream
        if (Parse(bytes, &r)) (void)tandem::rpc::FromProto(r.finish_reason());
        return;
      }
      default:
        ParseOnly(type, bytes);
    }
  }

 private:
  // Messages whose fields are only copied: parsing is all there is to check.
  static void ParseOnly(int type, absl::string_view bytes) {
    switch (type) {
      case 7: { v1::CancelRequest m; (void)Parse(bytes, &m); return; }
      case 8: { v1::HealthRequest m; (void)Parse(bytes, &m); return; }
      case 9: { v1::ReserveKvResponse m; (void)Parse(bytes, &m); return; }
      case 10: { v1::PrefillResponse m; (void)Parse(bytes, &m); return; }
      case 11: { v1::HealthResponse m; (void)Parse(bytes, &m); return; }
      case 12: { v1::RegisterWorkerResponse m; (void)Parse(bytes, &m); return; }
      case 13: { v1::HeartbeatResponse m; (void)Parse(bytes, &m); return; }
      case 14: { v1::KvEventAck m; (void)Parse(bytes, &m); return; }
      default: return;
    }
  }

  std::chrono::steady_clock::time_point now_{};
  std::unique_ptr<WorkerRegistry> registry_;
  std::unique_ptr<PrefixRouter> routing_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Router router;
  for (std::size_t pos = 0; pos + 3 <= size;) {
    const int type = data[pos] % 15;
    const std::size_t length = std::min<std::size_t>(data[pos + 1] | (data[pos + 2] << 8),
                                                      size - pos - 3);
    router.Accept(type, tandem::fuzz::AsText(data + pos + 3, length));
    pos += 3 + length;
  }
  return 0;
}
