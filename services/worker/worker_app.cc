#include "worker_app.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>

#include "absl/strings/str_cat.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "tandem/engine/engine.h"
#include "tandem/kernels/backend.h"
#include "tandem/model/loader.h"
#include "tandem/serving/engine_loop.h"
#include "router_link.h"
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
  if (absl::Status st = flags.Parse(argc, argv, config::ProcessEnv()); !st.ok()) {
    std::cerr << "error: " << st.message() << "\n";
    return 2;
  }
  if (flags.help_requested()) {
    std::cout << flags.Help();
    return 0;
  }
  if (cfg.model.empty()) {
    std::cerr << "error: --model (or TANDEM_MODEL) is required\n";
    return 2;
  }

  // Signals are taken synchronously by the main thread, so block them before any thread starts.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  auto backend = kernels::CreateCpuBackend({cfg.threads});
  model::LoadOptions load_options;
  load_options.served_name = cfg.served_model_name;
  auto model = model::LoadModel(cfg.model, load_options, backend.get());
  if (!model.ok()) return Fail(absl::StrCat("loading ", cfg.model, ": ", model.status().message()));

  engine::EngineConfig ecfg;
  ecfg.block_size = cfg.block_size;
  ecfg.kv_cache_bytes = cfg.kv_cache_mb << 20;
  ecfg.max_num_seqs = cfg.max_num_seqs;
  ecfg.max_batch_tokens = cfg.max_batch_tokens;
  ecfg.enable_prefix_caching = cfg.prefix_caching;
  auto engine = engine::Engine::Create(model->get(), backend.get(), ecfg);
  if (!engine.ok()) return Fail(absl::StrCat("engine: ", engine.status().message()));
  serving::EngineLoop loop(std::move(*engine), serving::EngineLoopOptions{cfg.max_in_flight});

  WorkerService service(cfg, &loop);
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort(cfg.listen, grpc::InsecureServerCredentials(), &bound_port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound_port == 0) return Fail(absl::StrCat("cannot listen on ", cfg.listen));

  const std::string endpoint = absl::StrCat(cfg.advertise_host, ":", bound_port);
  if (cfg.worker_id.empty()) cfg.worker_id = absl::StrCat(RoleName(role), "@", endpoint);
  if (!cfg.port_file.empty()) {
    const std::string tmp = cfg.port_file + ".tmp";
    std::ofstream(tmp) << bound_port << "\n";
    std::filesystem::rename(tmp, cfg.port_file);  // atomic: readers never see a partial file
  }
  std::cerr << RoleName(role) << " " << cfg.worker_id << " serving " << (*model)->config().name
            << " on " << endpoint << "\n";

  std::unique_ptr<RouterLink> link;
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
    info.set_incarnation(NewIncarnation());
    link = std::make_unique<RouterLink>(cfg.router, info, cfg.heartbeat_ms,
                                        [&service] { return service.CurrentLoad(); });
  }

  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::cerr << RoleName(role) << " stopping (signal " << sig << ")\n";
  link.reset();
  // In-flight streams get a short grace period, then are cancelled.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  return 0;
}

}  // namespace tandem::worker
