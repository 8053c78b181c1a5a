#include "router_app.h"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "router_config.h"
#include "router_server.h"
#include "tandem/config/service_main.h"
#include "tandem/tokenizer/model_tokenizer.h"

namespace tandem::router {
int RunRouterMain(int argc, char** argv) {
  RouterConfig cfg;
  config::FlagSet flags("tandem-router",
                        "OpenAI-compatible front door: registers workers, picks prefill/decode "
                        "workers per request and streams their tokens to clients.");
  BindRouterFlags(&flags, &cfg);
  if (auto exit_code = config::ParseServiceFlags(flags, argc, argv, config::ProcessEnv())) {
    return *exit_code;
  }
  if (cfg.model.empty()) {
    std::cerr << "error: --model (or TANDEM_ROUTER_MODEL) is required: the router tokenises\n";
    return 2;
  }

  config::StopSignals stop;  // before any thread starts
  // SIGHUP re-reads --api-keys-file; blocked here so that every thread inherits the mask and only
  // the reloader below takes it (without keys it is ignored rather than killing the router).
  sigset_t hup;
  sigemptyset(&hup);
  sigaddset(&hup, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &hup, nullptr);

  auto tok = tokenizer::LoadModelTokenizer(cfg.model, /*vocab_size=*/0);
  if (!tok.ok()) {
    std::cerr << "error: tokenizer of " << cfg.model << ": " << tok.status().message() << "\n";
    return 1;
  }
  RouterServer::Options options;
  options.config = cfg;
  options.served_model = ServedModelName(cfg);
  options.tokenizer = {tok->tokenizer.get(), tok->llama2c_conventions};
  auto server = RouterServer::Start(std::move(options));
  if (!server.ok()) {
    std::cerr << "error: " << server.status().message() << "\n";
    return 1;
  }
  if (!cfg.port_file.empty()) {
    if (absl::Status st = config::WritePortFile(
            cfg.port_file, {(*server)->http_port(), (*server)->control_port()});
        !st.ok()) {
      std::cerr << "error: " << st.message() << "\n";
      return 1;
    }
  }
  const std::string http_host = ParseHostPort("http-listen", cfg.http_listen)->host;
  const std::string control_host = ParseHostPort("control-listen", cfg.control_listen)->host;
  std::cerr << "router listening http=" << http_host << ":" << (*server)->http_port()
            << " control=" << control_host << ":" << (*server)->control_port() << std::endl;
  std::cerr << "router serving model " << ServedModelName(cfg) << "\n";
  if (cfg.api_keys_file.empty()) {
    std::cerr << "router: WARNING: no --api-keys-file: every endpoint is served to anyone who can "
                 "reach " << http_host << ":" << (*server)->http_port() << " without authentication\n";
  } else {
    std::cerr << "router: API keys from " << cfg.api_keys_file << " (SIGHUP re-reads it)\n";
  }
  if (!cfg.tls.enabled()) {
    std::cerr << "router: WARNING: no --tls-cert/--tls-key/--tls-ca: any process that reaches "
                 "the control port can register as a worker and be sent prompts\n";
  }
  if ((*server)->metrics_port() != 0) {
    std::cerr << "router metrics listening on port " << (*server)->metrics_port() << std::endl;
  }

  std::atomic<bool> stopping{false};
  std::thread reloader([&] {
    while (!stopping.load()) {
      timespec tick{0, 200 * 1000 * 1000};
      if (sigtimedwait(&hup, nullptr, &tick) != SIGHUP) continue;
      absl::Status st = (*server)->ReloadApiKeys();
      if (st.ok()) {
        std::cerr << "router: SIGHUP: API keys re-read from " << cfg.api_keys_file << std::endl;
      } else {
        std::cerr << "router: SIGHUP: keeping the API keys in force: " << st.message() << std::endl;
      }
    }
  });

  // The drain (docs/deployment.md): readiness fails at once so the Service stops sending; what
  // still arrives while endpoints catch up is served; in-flight generations finish, bounded by
  // --drain-timeout-ms; then what is left is cancelled and the router exits 0. A second SIGTERM
  // changes nothing; SIGINT stops at once.
  int sig = stop.Wait();
  const auto drain_start = std::chrono::steady_clock::now();
  const auto drain_deadline =
      drain_start + std::chrono::milliseconds(std::max(0, cfg.drain_timeout_ms));
  std::cerr << "router draining (signal " << sig << "): up to " << cfg.drain_timeout_ms
            << " ms for in-flight generations\n";
  (*server)->Drain(drain_deadline, [&] {
    if (sig == SIGINT) return true;
    if (auto again = stop.WaitFor(std::chrono::milliseconds(50)); again && *again == SIGINT) {
      sig = SIGINT;
    }
    return sig == SIGINT;
  });
  const auto drain_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now() - drain_start)
                            .count();
  const int left = (*server)->active_requests();
  if (left == 0) {
    std::cerr << "router drained in " << drain_ms << " ms\n";
  } else {
    std::cerr << "router drain ended after " << drain_ms << " ms with " << left
              << " generations left; they are cancelled\n";
  }
  stopping.store(true);
  reloader.join();
  (*server)->Shutdown(absl::ZeroDuration());
  return 0;
}

}  // namespace tandem::router
