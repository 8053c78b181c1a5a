#include "tandem/http/server.h"

#include <optional>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "linger.h"
#include "server_context.h"
#include "session.h"
#include "tandem/base/status_macros.h"

namespace tandem::http {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

// After Abort, connections close as soon as their strands run; this only bounds a wedged one.
constexpr absl::Duration kAbortWait = absl::Seconds(2);
// Accept failures (e.g. out of file descriptors) are retried after this, not in a hot loop.
constexpr std::chrono::milliseconds kAcceptRetry{50};

absl::StatusOr<tcp::endpoint> Resolve(net::io_context& io, const ServerConfig& config) {
  tcp::resolver resolver(io);
  error_code ec;
  auto results = resolver.resolve(config.host, std::to_string(config.port),
                                  tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || results.empty()) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve listen host '", config.host, "': ", ec.message()));
  }
  return results.begin()->endpoint();
}

}  // namespace

struct Server::Impl {
  explicit Impl(ServerConfig config, Router router)
      : context(std::make_shared<internal::ServerContext>(std::move(config), std::move(router))),
        io(context->config.io_threads),
        work(net::make_work_guard(io)),
        acceptor(net::make_strand(io)),
        accept_retry(acceptor.get_executor()) {}

  absl::Status Listen() {
    TANDEM_ASSIGN_OR_RETURN(tcp::endpoint endpoint, Resolve(io, context->config));
    auto fail = [&](absl::string_view what, const error_code& ec) {
      return absl::UnavailableError(absl::StrCat(what, " ", endpoint.address().to_string(), ":",
                                                 endpoint.port(), ": ", ec.message()));
    };
    error_code ec;
    if (acceptor.open(endpoint.protocol(), ec); ec) return fail("open socket for", ec);
    if (acceptor.set_option(net::socket_base::reuse_address(true), ec); ec) {
      return fail("set SO_REUSEADDR on", ec);
    }
    if (acceptor.bind(endpoint, ec); ec) return fail("bind", ec);
    if (acceptor.listen(net::socket_base::max_listen_connections, ec); ec) return fail("listen on", ec);
    port = acceptor.local_endpoint(ec).port();
    if (ec) return fail("read the bound port of", ec);
    return absl::OkStatus();
  }

  void StartThreads() {
    Accept();
    for (int i = 0; i < context->config.io_threads; ++i) {
      threads.emplace_back([this] { io.run(); });
    }
  }

  void Accept() {
    acceptor.async_accept(net::make_strand(io), [this](error_code ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
      if (ec) {
        accept_retry.expires_after(kAcceptRetry);
        accept_retry.async_wait([this](error_code ec) {
          if (!ec && acceptor.is_open()) Accept();
        });
        return;
      }
      if (context->draining) return;
      if (context->connection_count() >= context->config.max_connections) {
        internal::RejectOverloaded(std::move(socket));
      } else {
        internal::StartSession(context, std::move(socket));
      }
      Accept();
    });
  }

  void Shutdown(absl::Duration grace) {
    absl::MutexLock lock(&shutdown_mu);
    if (shut_down) return;
    shut_down = true;
    context->draining = true;
    net::post(acceptor.get_executor(), [this] {
      error_code ignored;
      acceptor.close(ignored);
      accept_retry.cancel();
    });
    for (auto& connection : context->LiveConnections()) connection->Drain();
    if (!context->WaitForNoConnections(absl::Now() + grace)) {
      for (auto& connection : context->LiveConnections()) connection->Abort();
      context->WaitForNoConnections(absl::Now() + kAbortWait);
    }
    work.reset();
    io.stop();
    for (std::thread& thread : threads) thread.join();
    threads.clear();
    // The posted close may not have run before io.stop(): a listener left open would complete
    // new clients' handshakes into its backlog and leave them hanging instead of refused.
    // Nothing else touches the acceptor now that the threads are gone.
    if (acceptor.is_open()) {
      error_code ignored;
      acceptor.close(ignored);
    }
    // Sessions whose handlers never ran again still hold streams; detach them now so a producer
    // cannot post into the stopped io_context.
    for (auto& connection : context->LiveConnections()) connection->CancelStreamAfterStop();
  }

  std::shared_ptr<internal::ServerContext> context;
  net::io_context io;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  tcp::acceptor acceptor;
  net::steady_timer accept_retry;
  std::vector<std::thread> threads;
  uint16_t port = 0;
  absl::Mutex shutdown_mu;  // A second Shutdown caller waits for the first to finish.
  bool shut_down ABSL_GUARDED_BY(shutdown_mu) = false;
};

absl::StatusOr<std::unique_ptr<Server>> Server::Start(ServerConfig config, Router router) {
  TANDEM_RETURN_IF_ERROR(config.Validate());
  auto impl = std::make_unique<Impl>(std::move(config), std::move(router));
  TANDEM_RETURN_IF_ERROR(impl->Listen());
  impl->StartThreads();
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { Shutdown(absl::ZeroDuration()); }

uint16_t Server::port() const { return impl_->port; }

size_t Server::active_connections() const { return impl_->context->connection_count(); }

void Server::Shutdown(absl::Duration grace) { impl_->Shutdown(grace); }

}  // namespace tandem::http
