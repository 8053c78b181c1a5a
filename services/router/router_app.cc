#include "router_app.h"

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "router_config.h"
#include "router_server.h"
#include "tandem/tokenizer/model_tokenizer.h"

namespace tandem::router {
namespace {

absl::Status WritePortFile(const std::string& path, int http_port, int control_port) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << http_port << " " << control_port << "\n";
    if (!out.good()) return absl::UnavailableError(absl::StrCat("cannot write ", tmp));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);  // atomic: readers never see a partial file
  if (ec) return absl::UnavailableError(absl::StrCat("cannot rename ", tmp, ": ", ec.message()));
  return absl::OkStatus();
}

}  // namespace

int RunRouterMain(int argc, char** argv) {
  RouterConfig cfg;
  config::FlagSet flags("tandem-router",
                        "OpenAI-compatible front door: registers workers, picks prefill/decode "
                        "workers per request and streams their tokens to clients.");
  BindRouterFlags(&flags, &cfg);
  if (absl::Status st = flags.Parse(argc, argv, config::ProcessEnv()); !st.ok()) {
    std::cerr << "error: " << st.message() << "\n";
    return 2;
  }
  if (flags.help_requested()) {
    std::cout << flags.Help();
    return 0;
  }
  if (cfg.model.empty()) {
    std::cerr << "error: --model (or TANDEM_ROUTER_MODEL) is required: the router tokenises\n";
    return 2;
  }

  // Signals are taken synchronously by the main thread, so block them before any thread starts.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

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
    if (absl::Status st = WritePortFile(cfg.port_file, (*server)->http_port(),
                                        (*server)->control_port());
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

  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::cerr << "router stopping (signal " << sig << ")\n";
  (*server)->Shutdown(absl::Seconds(5));
  return 0;
}

}  // namespace tandem::router
