#include "worker_app.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <random>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "tandem/engine/engine.h"
#include "tandem/config/service_main.h"
#include "tandem/http/lifecycle_routes.h"
#include "tandem/http/server.h"
#include "tandem/transport/ucx_agent.h"
#include "tandem/kernels/backend.h"
#include "tandem/model/loader.h"
#include "tandem/serving/engine_loop.h"
#include "grpcpp/create_channel.h"
#include "kv_event_publisher.h"
#include "kv_handoff.h"
#include "kv_tiers.h"
#include "router_fanout.h"
#include "worker_metrics.h"
#include "worker_config.h"
#include "worker_service.h"

namespace tandem::worker {
namespace {

const char* RoleName(v1::WorkerRole role) {
  switch (role) {
    case v1::WORKER_ROLE_PREFILL: return "prefill";
    case v1::WORKER_ROLE_DECODE: return "decode";
    default: return "worker";
  }
}

std::uint64_t NewIncarnation() {
  std::random_device rd;
  return (static_cast<std::uint64_t>(rd()) << 32) ^ rd() ^
         static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
}

int Fail(const std::string& message) {
  std::cerr << "error: " << message << "\n";
  return 1;
}

}  // namespace

int RunWorkerMain(v1::WorkerRole role, const char* program, const char* summary, int argc,
                  char** argv) {
  WorkerConfig cfg;
  cfg.role = role;
  config::FlagSet flags(program, summary);
  BindWorkerFlags(&flags, &cfg);
  if (auto exit_code = config::ParseServiceFlags(flags, argc, argv, config::ProcessEnv())) {
    return *exit_code;
  }
  if (cfg.model.empty()) {
    std::cerr << "error: --model (or TANDEM_MODEL) is required\n";
    return 2;
  }
  if (absl::Status tls = security::ValidateTls(cfg.tls); !tls.ok()) {
    std::cerr << "error: " << tls.message() << "\n";
    return 2;
  }
  if (!cfg.tls.enabled()) {
    std::cerr << "worker: WARNING: no --tls-cert/--tls-key/--tls-ca: the control plane (this "
                 "worker's gRPC service and its calls to routers) is plaintext and "
                 "unauthenticated\n";
  }

  config::StopSignals stop;  // before any thread starts

  std::string cpu_isa_error;
  const std::optional<kernels::CpuIsa> cpu_isa =
      kernels::ParseAvailableCpuIsa(cfg.cpu_isa, &cpu_isa_error);
  if (!cpu_isa) return Fail("--cpu-isa " + cpu_isa_error);
  std::optional<kernels::Bf16MatMul> bf16_matmul;
  if (cfg.bf16_matmul == "auto") {
    const absl::StatusOr<kernels::DType> weights = model::PredominantMatrixDtype(cfg.model);
    if (!weights.ok()) {
      return Fail(absl::StrCat("loading ", cfg.model, ": ", weights.status().message()));
    }
    bf16_matmul = kernels::AutoBf16MatMul(*cpu_isa, *weights);
    // Operators pinning one value across a mixed pool want to see why this node picked its own.
    // Other checkpoints never look at the rates, so they are not measured for them.
    if (*weights == kernels::DType::kBF16) {
      if (const auto& rates = kernels::Bf16DotRatesOfThisCpu()) {
        std::cerr << "worker: --bf16-matmul auto: " << kernels::Bf16MatMulName(*bf16_matmul)
                  << " (one core: VDPBF16PS " << static_cast<int>(rates->dot_gflops)
                  << " GFLOP/s, float32 FMA " << static_cast<int>(rates->fma_gflops)
                  << " GFLOP/s; avx512bf16 needs " << kernels::kBf16DotMinSpeedup << "x)\n";
      }
    }
  } else {
    std::string bf16_matmul_error;
    bf16_matmul = kernels::ParseAvailableBf16MatMul(cfg.bf16_matmul, *cpu_isa, &bf16_matmul_error);
    if (!bf16_matmul) return Fail("--bf16-matmul " + bf16_matmul_error);
  }
  auto backend = kernels::CreateCpuBackend(
      {.num_threads = cfg.threads, .isa = *cpu_isa, .bf16_matmul = *bf16_matmul});
  model::LoadOptions load_options;
  load_options.served_name = cfg.served_model_name;
  auto model = model::LoadModel(cfg.model, load_options, backend.get());
  if (!model.ok()) return Fail(absl::StrCat("loading ", cfg.model, ": ", model.status().message()));

  // One value per process start: the router drops state of an older incarnation, and a worker
  // without --worker-id is named by it (the KV receiver needs the id before the port is bound).
  const std::uint64_t incarnation = NewIncarnation();
  if (cfg.worker_id.empty()) {
    cfg.worker_id = absl::StrCat(RoleName(role), "-", absl::Hex(incarnation));
  }

  // Declared before the engine loop so they outlive the engine that calls into them.
  // Without prefix caching nothing is reused, so there is nothing to keep below the device.
  if (!cfg.prefix_caching) cfg.kv_tiers.host_mb = 0;
  auto kv_tiers = OpenKvTiers(cfg.kv_tiers, (*model)->config(), (*model)->kv_layout(),
                              cfg.block_size);
  if (!kv_tiers.ok()) return Fail(absl::StrCat("KV tiers: ", kv_tiers.status().message()));
  // What a prefill/decode pair must agree on for a KV handoff to mean anything.
  const std::string kv_layout_id =
      KvDiskSubdir((*model)->config(), (*model)->kv_layout(), cfg.block_size);
  auto worker_metrics = WorkerMetrics::Create(RoleName(role), cfg.worker_id,
                                              {cfg.generation, kv_layout_id,
                                               std::string(backend->name())});
  if (!worker_metrics.ok()) return Fail(std::string(worker_metrics.status().message()));
  // Every router replica behind --router: registration, heartbeats, KV event streams. Declared
  // before the engine loop so that it outlives the engine that sends it device events.
  std::unique_ptr<RouterFanout> routers;
  std::atomic<RouterFanout*> device_events_to{nullptr};

  engine::EngineConfig ecfg;
  ecfg.block_size = cfg.block_size;
  ecfg.kv_cache_bytes = cfg.kv_cache_mb << 20;
  ecfg.max_num_seqs = cfg.max_num_seqs;
  ecfg.max_batch_tokens = cfg.max_batch_tokens;
  ecfg.enable_prefix_caching = cfg.prefix_caching;
  ecfg.lower_tiers = kv_tiers->get();
  ApplyDeviceDemotion(cfg.kv_tiers, &ecfg);
  auto engine = engine::Engine::Create(model->get(), backend.get(), ecfg);
  if (!engine.ok()) return Fail(absl::StrCat("engine: ", engine.status().message()));
  if (!cfg.router.empty()) {
    (*engine)->block_manager().SetEventListener([&device_events_to](const engine::KvCacheEvent& e) {
      if (RouterFanout* r = device_events_to.load()) r->OnDeviceEvent(e);
    });
  }
  (*engine)->SetTierFetchObserver(
      [m = worker_metrics->get()](const engine::TierFetchReport& r) { m->ObserveFetch(r); });
  serving::EngineLoop loop(std::move(*engine), serving::EngineLoopOptions{cfg.max_in_flight});

  // Only disaggregated roles move KV, so only they pay for a UCX context.
  std::unique_ptr<transport::TransferAgent> agent;
  std::unique_ptr<KvReceiver> receiver;
  std::unique_ptr<KvSender> sender;
  if (role == v1::WORKER_ROLE_PREFILL || role == v1::WORKER_ROLE_DECODE) {
    auto created = transport::CreateUcxAgent(
        {.transports = cfg.ucx_transports, .tcp_port_range = cfg.ucx_port_range});
    if (!created.ok()) return Fail(absl::StrCat("UCX: ", created.status().message()));
    agent = std::move(*created);
  }
  if (role == v1::WORKER_ROLE_DECODE) {
    auto created = KvReceiver::Create(&loop, agent.get(), cfg.worker_id);
    if (!created.ok()) return Fail(absl::StrCat("KV receiver: ", created.status().message()));
    receiver = std::move(*created);
  }
  if (role == v1::WORKER_ROLE_PREFILL) {
    model::KvStorage storage;
    loop.RunOnLoop([&](engine::Engine& e) {
          storage = e.block_manager().storage();
          return absl::OkStatus();
        })
        .IgnoreError();
    sender = std::make_unique<KvSender>(agent.get(), storage);
  }

  WorkerService service(cfg, &loop, receiver.get(), sender.get());
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort(cfg.listen, security::ServerCredentials(cfg.tls), &bound_port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound_port == 0) return Fail(absl::StrCat("cannot listen on ", cfg.listen));

  const std::string endpoint = absl::StrCat(cfg.advertise_host, ":", bound_port);

  if (!cfg.router.empty()) {
    v1::WorkerInfo info;
    info.set_worker_id(cfg.worker_id);
    info.set_role(role);
    info.set_model((*model)->config().name);
    info.set_grpc_endpoint(endpoint);
    info.set_kv_block_size(cfg.block_size);
    info.set_kv_hash_scheme("chained-fnv1a-splitmix64/v1");
    info.set_max_context((*model)->config().max_position_embeddings);
    info.set_max_running_requests(cfg.max_in_flight);
    info.set_max_batch_tokens(static_cast<std::uint32_t>(std::max(0, cfg.max_batch_tokens)));
    info.set_incarnation(incarnation);
    info.set_generation(cfg.generation);
    info.set_kv_layout_id(kv_layout_id);
    RouterFanoutOptions ropts;
    ropts.routers = cfg.router;
    ropts.heartbeat_ms = cfg.heartbeat_ms;
    ropts.tls = cfg.tls;
    ropts.info = info;
    ropts.load = [&service] { return service.CurrentLoad(); };
    ropts.publisher.worker_id = cfg.worker_id;
    ropts.publisher.incarnation = incarnation;
    ropts.store = kv_tiers->get();
    routers = std::make_unique<RouterFanout>(
        std::move(ropts), [&loop](const std::function<void()>& fn) {
          bool ran = false;
          loop.RunOnLoop([&](engine::Engine&) {
                fn();
                ran = true;
                return absl::OkStatus();
              })
              .IgnoreError();
          if (!ran) fn();  // the loop has stopped: no device event can race it
        });
    device_events_to = routers.get();
    routers->Start();
  }
  // Whatever the way out, the routers are left before the service their heartbeats read and the
  // engine loop the resolver calls into are destroyed (`routers` itself outlives the engine).
  absl::Cleanup leave_routers = [&routers] {
    if (routers != nullptr) routers->Shutdown();
  };

  std::unique_ptr<http::Server> metrics_server;
  if (!cfg.metrics_listen.empty()) {
    auto hp = config::ParseHostPort("metrics-listen", cfg.metrics_listen);
    if (!hp.ok()) return Fail(std::string(hp.status().message()));
    http::ServerConfig hcfg;
    hcfg.host = hp->host;
    hcfg.port = static_cast<std::uint16_t>(hp->port);
    hcfg.io_threads = 1;
    http::Router routes;
    routes
        .Handle("GET", "/metrics",
                [&](const http::Request&) -> http::HandlerResult {
                  WorkerMetrics::Status status;
                  status.draining = service.draining();
                  status.ready = !status.draining && (routers == nullptr || routers->registered());
                  if (routers != nullptr) {
                    status.routers = routers->routers();
                    status.routers_registered = routers->registered_routers();
                  }
                  const KvEventPublisherStats kv_stats =
                      routers != nullptr ? routers->publisher_stats() : KvEventPublisherStats{};
                  http::Response r = http::Response::Text(
                      200, (*worker_metrics)
                                ->Scrape(loop, service, receiver.get(), kv_tiers->get(),
                                         routers != nullptr ? &kv_stats : nullptr, status));
                  r.content_type = std::string(metrics::Registry::kContentType);
                  return r;
                })
        .IgnoreError();
    // Ready: the model is loaded and the KV pool allocated (both happen before this server
    // starts), the router has us registered, and no drain has begun. /drain starts the drain
    // exactly as SIGTERM does (the main thread runs it).
    http::AddLifecycleRoutes(
        routes,
        [&]() -> std::optional<std::string> {
          if (service.draining()) return "draining";
          if (routers != nullptr && !routers->registered()) return "not registered with the router";
          return std::nullopt;
        },
        [&] {
          service.SetDraining();
          kill(getpid(), SIGTERM);
        });
    auto started = http::Server::Start(hcfg, std::move(routes));
    if (!started.ok()) return Fail(absl::StrCat("metrics server: ", started.status().message()));
    metrics_server = std::move(*started);
  }
  if (!cfg.port_file.empty()) {
    absl::Status written = config::WritePortFile(
        cfg.port_file, {bound_port, metrics_server ? static_cast<int>(metrics_server->port()) : 0});
    if (!written.ok()) return Fail(std::string(written.message()));
  }
  std::cerr << RoleName(role) << " " << cfg.worker_id << " serving " << (*model)->config().name
            << " on " << endpoint << " (" << backend->name() << ")\n";

  // The drain (docs/deployment.md, "Drain"): readiness fails and the router hears "draining" at
  // once; what this worker holds (streams, prefills, KV reservations awaiting their handoff)
  // finishes, bounded by --drain-timeout-ms; then it deregisters and exits 0. A second SIGTERM
  // (the kubelet's, after the preStop hook) changes nothing; SIGINT stops at once.
  const int sig = stop.Wait();
  const auto drain_start = std::chrono::steady_clock::now();
  const auto deadline = drain_start + std::chrono::milliseconds(std::max(0, cfg.drain_timeout_ms));
  service.SetDraining();
  if (routers != nullptr) routers->HeartbeatNow();
  std::cerr << RoleName(role) << " draining (signal " << sig << "): up to "
            << cfg.drain_timeout_ms << " ms for in-flight work\n";
  bool drained = false;
  for (;;) {
    if (service.rpcs_in_flight() == 0 && loop.load().in_flight == 0) {
      drained = true;
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    if (auto again = stop.WaitFor(std::chrono::milliseconds(50)); again && *again == SIGINT) {
      std::cerr << RoleName(role) << ": interrupted, stopping without finishing the drain\n";
      break;
    }
  }
  const auto drain_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now() - drain_start)
                            .count();
  if (drained) {
    std::cerr << RoleName(role) << " drained in " << drain_ms << " ms\n";
  } else {
    const serving::LoopLoad left = loop.load();
    std::cerr << RoleName(role) << " drain ended after " << drain_ms << " ms with "
              << left.in_flight << " requests and " << service.rpcs_in_flight()
              << " calls left; they are cancelled (the router migrates them)\n";
  }
  if (routers != nullptr) {
    const int joined = routers->routers();
    const int gone = routers->Deregister(drained ? "drained" : "drain deadline");
    if (gone < joined) {
      std::cerr << RoleName(role) << ": " << joined - gone << " of " << joined
                << " routers did not take the deregistration; their lease will remove this worker\n";
    }
  }
  // In-flight streams get a short grace period, then are cancelled.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  if (metrics_server) metrics_server->Shutdown(absl::Seconds(1));
  return 0;
}

}  // namespace tandem::worker
