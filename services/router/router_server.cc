#include "router_server.h"

#include <algorithm>
#include <iostream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "api/http/api_routes.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "tandem/base/status_macros.h"
#include "workers/control_service.h"

namespace tandem::router {

RouterServer::RouterServer(Options options) : options_(std::move(options)) {
  if (!options_.now) options_.now = [] { return std::chrono::steady_clock::now(); };
}

namespace {

std::vector<std::string> ImageUrlHosts(const std::string& allowlist) {
  std::vector<std::string> hosts;
  for (absl::string_view host : absl::StrSplit(allowlist, ',', absl::SkipWhitespace())) {
    hosts.emplace_back(absl::StripAsciiWhitespace(host));
  }
  return hosts;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RouterServer>> RouterServer::Start(Options options) {
  if (options.tokenizer.tokenizer == nullptr) {
    return absl::InvalidArgumentError("RouterServer needs a tokenizer");
  }
  std::unique_ptr<RouterServer> server(new RouterServer(std::move(options)));
  absl::Status st = server->Init();
  if (!st.ok()) {
    server->Shutdown(absl::ZeroDuration());
    return st;
  }
  return server;
}

absl::Status RouterServer::Init() {
  const RouterConfig& cfg = options_.config;
  if (cfg.kv_block_size < 1) return absl::InvalidArgumentError("--kv-block-size must be >= 1");
  if (cfg.worker_lease_ms < 1) return absl::InvalidArgumentError("--worker-lease-ms must be >= 1");
  if (cfg.max_in_flight < 1) return absl::InvalidArgumentError("--max-in-flight must be >= 1");
  if (cfg.max_queue_length < 0 || cfg.max_queue_wait_ms < 0 || cfg.max_migrations < 0) {
    return absl::InvalidArgumentError(
        "--max-queue-length, --max-queue-wait-ms and --max-migrations must not be negative");
  }
  if (cfg.request_timeout_ms < 1) {
    return absl::InvalidArgumentError("--request-timeout-ms must be >= 1");
  }
  TANDEM_ASSIGN_OR_RETURN(HostPort http_addr, ParseHostPort("http-listen", cfg.http_listen));
  TANDEM_ASSIGN_OR_RETURN(HostPort control_addr, ParseHostPort("control-listen", cfg.control_listen));
  TANDEM_ASSIGN_OR_RETURN(metrics_, RouterMetrics::Create(&metrics_registry_));
  TANDEM_RETURN_IF_ERROR(security::ValidateTls(cfg.tls));

  registry_ = std::make_unique<WorkerRegistry>(WorkerRegistry::Options{
      .kv_block_size = cfg.kv_block_size,
      .kv_hash_scheme = cfg.kv_hash_scheme,
      .lease_ms = cfg.worker_lease_ms,
      .now = options_.now,
      .metrics = &metrics_,
      .tls = cfg.tls});
  if (cfg.routing_index_blocks < 1) {
    return absl::InvalidArgumentError("--routing-index-blocks must be >= 1");
  }
  if (cfg.prefill_hold_depth < 0 || !(cfg.prefill_hold_aging >= 0)) {
    return absl::InvalidArgumentError(
        "--prefill-hold-depth and --prefill-hold-aging must not be negative");
  }
  if (!(cfg.prefill_piece_seconds >= 0)) {
    return absl::InvalidArgumentError("--prefill-piece-seconds must not be negative");
  }
  TANDEM_ASSIGN_OR_RETURN(
      prefix_router_, PrefixRouter::Create(PrefixRouter::Options{
                          .block_size = cfg.kv_block_size,
                          .policy = cfg.routing_policy,
                          .max_index_blocks = static_cast<std::size_t>(cfg.routing_index_blocks),
                          .prefill_hold_depth = cfg.prefill_hold_depth,
                          .prefill_hold_aging = cfg.prefill_hold_aging,
                          .prefill_batch_tokens = cfg.prefill_batch_tokens,
                          .warm_ups = cfg.warm_ups,
                          .held_moves = cfg.held_moves,
                          .prefill_pieces = {.piece_seconds = cfg.prefill_piece_seconds},
                          .metrics = &metrics_,
                          .now = options_.now}));
  selector_ = std::make_unique<PolicySelector>(registry_.get(), prefix_router_.get());
  if (cfg.generation_threads < 0) {
    return absl::InvalidArgumentError("--generation-threads must not be negative");
  }
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  executor_ = std::make_unique<async::Executor>(cfg.generation_threads > 0 ? cfg.generation_threads
                                                                           : cores);
  jobs_ = std::make_unique<async::TaskGroup>(executor_.get());
  dispatcher_ = std::make_unique<Dispatcher>(
      registry_.get(), Dispatcher::Options{.metrics = &metrics_, .executor = executor_.get()});
  TANDEM_ASSIGN_OR_RETURN(traffic_, TrafficClassifier::Parse(cfg.api_key_traffic_classes));
  if (cfg.prefix_cache_isolation != "auto" && cfg.prefix_cache_isolation != "tenant" &&
      cfg.prefix_cache_isolation != "shared") {
    return absl::InvalidArgumentError("--prefix-cache-isolation must be auto, tenant or shared");
  }
  const bool isolate_tenant_cache =
      cfg.prefix_cache_isolation == "tenant" ||
      (cfg.prefix_cache_isolation == "auto" && !cfg.api_keys_file.empty());
  if (!cfg.api_keys_file.empty()) {
    TANDEM_ASSIGN_OR_RETURN(auth_, ApiKeyAuth::Load(cfg.api_keys_file, &metrics_registry_));
    TANDEM_ASSIGN_OR_RETURN(limits_, TenantLimits::Create(TenantLimits::Options{
                                         .now = options_.limits_now, .registry = &metrics_registry_}));
    limits_->Configure(*auth_->keys());
  }
  admission_ = std::make_unique<Admission>(
      AdmissionOptions{.max_in_flight = cfg.max_in_flight,
                       .max_queue_length = cfg.max_queue_length,
                       .max_queue_wait = std::chrono::milliseconds(cfg.max_queue_wait_ms)},
      &metrics_, executor_.get());
  const RunDeps run{.selector = selector_.get(),
                    .dispatcher = dispatcher_.get(),
                    .metrics = &metrics_,
                    .model = options_.served_model,
                    .max_migrations = cfg.max_migrations,
                    .executor = executor_.get()};
  generation_ = std::make_unique<GenerationApi>(
      GenerationApi::Options{.served_model = options_.served_model,
                             .request_timeout = std::chrono::milliseconds(cfg.request_timeout_ms),
                             .isolate_tenant_cache = isolate_tenant_cache},
      GenerationApi::Deps{.tokenizer = options_.tokenizer,
                          .run = run,
                          .admission = admission_.get(),
                          .metrics = &metrics_,
                          .jobs = jobs_.get(),
                          .traffic = &traffic_,
                          .limits = limits_.get()});

  TANDEM_ASSIGN_OR_RETURN(const ChatFormat format, ResolveChatFormat(cfg.chat_format, cfg.model));
  TANDEM_ASSIGN_OR_RETURN(
      protocols_,
      ProtocolApi::Create(
          ProtocolApi::Options{.served_model = options_.served_model,
                               .format = format,
                               .request_timeout = std::chrono::milliseconds(cfg.request_timeout_ms),
                               .isolate_tenant_cache = isolate_tenant_cache,
                               .image_url_hosts = ImageUrlHosts(cfg.image_url_allowlist),
                               .image_fetch_concurrency = cfg.image_fetch_concurrency},
          ProtocolApi::Deps{.tokenizer = options_.tokenizer,
                            .run = run,
                            .admission = admission_.get(),
                            .metrics = &metrics_,
                            .jobs = jobs_.get(),
                            .traffic = &traffic_,
                            .limits = limits_.get()}));

  control_service_ = std::make_unique<ControlService>(registry_.get(), prefix_router_.get());
  grpc::ServerBuilder builder;
  builder.AddListeningPort(cfg.control_listen, security::ServerCredentials(cfg.tls), &control_port_);
  builder.RegisterService(control_service_.get());
  control_server_ = builder.BuildAndStart();
  if (control_server_ == nullptr || control_port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on --control-listen ", cfg.control_listen));
  }

  http::Router routes;
  const RouteDeps route_deps{.served_model = options_.served_model,
                             .created_unix_s = absl::ToUnixSeconds(absl::Now()),
                             .generation = generation_.get(),
                             .protocols = protocols_.get(),
                             .registry = registry_.get(),
                             .metrics_registry = &metrics_registry_,
                             .metrics = &metrics_,
                             .auth = auth_.get(),
                             .serve_metrics = cfg.metrics_listen.empty(),
                             .draining = &draining_};
  TANDEM_RETURN_IF_ERROR(InstallRoutes(&routes, route_deps));
  if (!cfg.metrics_listen.empty()) {
    TANDEM_ASSIGN_OR_RETURN(HostPort ops_addr, ParseHostPort("metrics-listen", cfg.metrics_listen));
    http::Router ops_routes;
    TANDEM_RETURN_IF_ERROR(InstallOperationsRoutes(&ops_routes, route_deps));
    http::ServerConfig ops_config;
    ops_config.host = ops_addr.host;
    ops_config.port = static_cast<uint16_t>(ops_addr.port);
    ops_config.io_threads = 1;
    ops_config.max_connections = 64;
    TANDEM_ASSIGN_OR_RETURN(ops_server_, http::Server::Start(ops_config, std::move(ops_routes)));
    metrics_port_ = ops_server_->port();
  }
  http::ServerConfig http_config;
  http_config.host = http_addr.host;
  http_config.port = static_cast<uint16_t>(http_addr.port);
  http_config.io_threads = cfg.http_io_threads;
  if (cfg.http_max_connections < 1) {
    return absl::InvalidArgumentError("--http-max-connections must be >= 1");
  }
  http_config.max_connections = static_cast<size_t>(cfg.http_max_connections);
  http_config.max_body_bytes = static_cast<size_t>(std::max<std::int64_t>(0, cfg.max_body_bytes));
  http_config.header_timeout = absl::Milliseconds(cfg.header_timeout_ms);
  TANDEM_ASSIGN_OR_RETURN(http_server_, http::Server::Start(http_config, std::move(routes)));
  http_port_ = http_server_->port();

  sweeper_ = std::thread([this] { SweepLeases(); });
  return absl::OkStatus();
}

absl::Status RouterServer::ReloadApiKeys() {
  if (auth_ == nullptr) return absl::FailedPreconditionError("the router has no --api-keys-file");
  TANDEM_RETURN_IF_ERROR(auth_->Reload());
  limits_->Configure(*auth_->keys());
  return absl::OkStatus();
}

void RouterServer::SweepLeases() {
  // Often enough that worker_up and in-flight requests on a silent worker react well within a
  // lease; the registry also expires leases lazily whenever it selects.
  const absl::Duration period =
      absl::Milliseconds(std::clamp(options_.config.worker_lease_ms / 4, 10, 250));
  absl::MutexLock lock(&mu_);
  while (!mu_.AwaitWithTimeout(absl::Condition(&stopping_), period)) {
    mu_.Unlock();
    registry_->ExpireLeases();
    mu_.Lock();
  }
}

void RouterServer::BeginDrain() {
  if (draining_.exchange(true)) return;
  if (metrics_.draining != nullptr) metrics_.draining->Set(1);
}

bool RouterServer::Drain(std::chrono::steady_clock::time_point deadline,
                         const std::function<bool()>& interrupted) {
  BeginDrain();
  while (active_requests() > 0 && std::chrono::steady_clock::now() < deadline) {
    if (interrupted()) break;
  }
  return active_requests() == 0;
}

void RouterServer::Shutdown(absl::Duration grace) {
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
    stopping_ = true;
  }
  if (sweeper_.joinable()) sweeper_.join();
  if (admission_ != nullptr) {
    const absl::Time deadline = absl::Now() + grace;
    while (admission_->active() > 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(20));
    admission_->CloseAndCancelAll(absl::UnavailableError("the router is shutting down"));
  }
  if (http_server_ != nullptr) http_server_->Shutdown(absl::Seconds(2));
  if (ops_server_ != nullptr) ops_server_->Shutdown(absl::Seconds(1));
  // Cancelled generations end as soon as their workers' calls return.
  if (jobs_ != nullptr && !jobs_->Wait(std::chrono::seconds(10))) {
    std::cerr << "router: " << jobs_->running()
              << " generations did not end within 10 s of shutdown\n";
  }
  if (control_server_ != nullptr) {
    control_server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }
}

RouterServer::~RouterServer() { Shutdown(absl::ZeroDuration()); }

}  // namespace tandem::router
