// tandem-encoder: images in, embedding rows out (docs/architecture.md, "Vision encoder").
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <optional>
#include <random>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "encoder_config.h"
#include "encoder_metrics.h"
#include "encoder_service.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "tandem/base/process.h"
#include "tandem/config/service_main.h"
#include "tandem/http/lifecycle_routes.h"
#include "tandem/http/server.h"
#include "tandem/kernels/backend.h"
#include "tandem/model/vision.h"
#include "tandem/rpc/router_link.h"
#include "tower_encoder.h"

namespace tandem::encoder {
namespace {

int Fail(const std::string& message) {
  std::cerr << "error: " << message << "\n";
  return 1;
}

std::uint64_t NewIncarnation() {
  std::random_device rd;
  return (static_cast<std::uint64_t>(rd()) << 32) ^ rd() ^
         static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
}

int Run(int argc, char** argv) {
  EncoderConfig cfg;
  config::FlagSet flags("tandem-encoder",
                        "Vision encoder: preprocesses images, runs the vision tower and keeps "
                        "the rows for prefill workers to fetch.");
  BindEncoderFlags(&flags, &cfg);
  if (auto exit_code = config::ParseServiceFlags(flags, argc, argv, config::ProcessEnv())) {
    return *exit_code;
  }
  if (cfg.model.empty() || cfg.served_model_name.empty()) {
    std::cerr << "error: --model and --served-model-name are required\n";
    return 2;
  }
  if (cfg.cache_mb <= 0 || cfg.max_concurrent_encodes <= 0 || cfg.max_waiting_encodes < 0 ||
      cfg.max_image_mb <= 0 || cfg.lease_ms <= 0) {
    std::cerr << "error: --cache-mb, --max-concurrent-encodes, --max-image-mb and --lease-ms "
                 "must be positive, --max-waiting-encodes not negative\n";
    return 2;
  }
  if (absl::Status tls = security::ValidateTls(cfg.tls); !tls.ok()) {
    std::cerr << "error: " << tls.message() << "\n";
    return 2;
  }
  const std::uint64_t incarnation = NewIncarnation();
  if (cfg.worker_id.empty()) cfg.worker_id = absl::StrCat("encoder-", incarnation % 100000);
  config::StopSignals stop;

  std::string cpu_isa_error;
  const std::optional<kernels::CpuIsa> cpu_isa =
      kernels::ParseAvailableCpuIsa(cfg.cpu_isa, &cpu_isa_error);
  if (!cpu_isa) return Fail("--cpu-isa " + cpu_isa_error);
  auto backend = kernels::CreateCpuBackend({.num_threads = cfg.threads, .isa = *cpu_isa});
  auto tower = model::LoadVisionTower(cfg.model, backend.get());
  if (!tower.ok()) return Fail(absl::StrCat("vision tower: ", tower.status().message()));
  image::ImageLimits limits;
  limits.max_image_bytes = static_cast<std::size_t>(cfg.max_image_mb) << 20;
  TowerEncoder encoder(std::move(*tower), limits);

  auto metrics = EncoderMetrics::Create(cfg.worker_id);
  if (!metrics.ok()) return Fail(std::string(metrics.status().message()));
  EmbeddingCacheOptions cache_options;
  cache_options.max_bytes = static_cast<std::size_t>(cfg.cache_mb) << 20;
  cache_options.default_lease = std::chrono::milliseconds(cfg.lease_ms);
  EmbeddingCache cache(cache_options);
  EncoderServiceOptions service_options;
  service_options.max_image_bytes = limits.max_image_bytes;
  service_options.max_concurrent_encodes = cfg.max_concurrent_encodes;
  service_options.max_waiting_encodes = cfg.max_waiting_encodes;
  EncoderService service(&encoder, &cache, service_options, (*metrics)->encode_seconds());

  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort(cfg.listen, security::ServerCredentials(cfg.tls), &bound_port);
  builder.SetMaxReceiveMessageSize(static_cast<int>(limits.max_image_bytes + (1 << 20)));
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound_port == 0) return Fail(absl::StrCat("cannot listen on ", cfg.listen));
  const std::string endpoint = absl::StrCat(cfg.advertise_host, ":", bound_port);

  std::atomic<bool> draining{false};
  std::unique_ptr<rpc::RouterLink> router;
  if (!cfg.router.empty()) {
    v1::WorkerInfo info;
    info.set_worker_id(cfg.worker_id);
    info.set_role(v1::WORKER_ROLE_ENCODER);
    info.set_model(cfg.served_model_name);
    info.set_grpc_endpoint(endpoint);
    info.set_incarnation(incarnation);
    info.set_generation(cfg.generation);
    info.set_max_running_requests(
        static_cast<std::uint32_t>(cfg.max_concurrent_encodes + cfg.max_waiting_encodes));
    router = std::make_unique<rpc::RouterLink>(
        cfg.router, info, cfg.heartbeat_ms,
        [&] {
          const EncoderServiceStats s = service.stats();
          v1::WorkerLoad load;
          load.set_running_requests(s.encoding);
          load.set_waiting_requests(s.waiting);
          load.set_draining(draining.load());
          return load;
        },
        rpc::RouterLink::KvSync{}, cfg.tls);
  }
  absl::Cleanup leave_router = [&router] { router.reset(); };

  std::unique_ptr<http::Server> metrics_server;
  if (!cfg.metrics_listen.empty()) {
    auto hp = config::ParseHostPort("metrics-listen", cfg.metrics_listen);
    if (!hp.ok()) return Fail(std::string(hp.status().message()));
    http::ServerConfig hcfg;
    hcfg.host = hp->host;
    hcfg.port = static_cast<std::uint16_t>(hp->port);
    hcfg.io_threads = 1;
    const auto ready = [&] { return !draining.load() && (router == nullptr || router->registered()); };
    http::Router routes;
    routes
        .Handle("GET", "/metrics",
                [&](const http::Request&) -> http::HandlerResult {
                  http::Response r = http::Response::Text(
                      200, (*metrics)->Scrape(cache, service, ready(), draining.load()));
                  r.content_type = std::string(metrics::Registry::kContentType);
                  return r;
                })
        .IgnoreError();
    http::AddLifecycleRoutes(
        routes,
        [&]() -> std::optional<std::string> {
          if (draining.load()) return "draining";
          if (!ready()) return "not registered with the router";
          return std::nullopt;
        },
        [&] {
          draining.store(true);
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
  std::cerr << "encoder " << cfg.worker_id << " (" << encoder.tower().kind() << ", "
            << encoder.tower().hidden_size() << " per row) serving images for "
            << cfg.served_model_name << " on " << endpoint << " (" << backend->name() << ")\n";

  // Drain: readiness fails and the router hears it with the next heartbeat; images being encoded
  // finish (bounded); rows already leased stay fetchable until the server stops.
  const int sig = stop.Wait();
  draining.store(true);
  std::cerr << "encoder draining (signal " << sig << ")\n";
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(0, cfg.drain_timeout_ms));
  while (std::chrono::steady_clock::now() < deadline) {
    const EncoderServiceStats s = service.stats();
    if (s.encoding == 0 && s.waiting == 0 && cache.stats().leases == 0) break;
    if (auto again = stop.WaitFor(std::chrono::milliseconds(50)); again && *again == SIGINT) break;
  }
  if (router != nullptr) router->Deregister("drained");
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  if (metrics_server) metrics_server->Shutdown(absl::Seconds(1));
  return 0;
}

}  // namespace
}  // namespace tandem::encoder

int main(int argc, char** argv) {
  tandem::base::ConfigureServingProcess();
  return tandem::encoder::Run(argc, argv);
}
