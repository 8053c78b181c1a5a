#include "linger.h"

#include <array>
#include <memory>
#include <string_view>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

namespace tandem::http::internal {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;

class Lingerer : public std::enable_shared_from_this<Lingerer> {
 public:
  Lingerer(tcp::socket socket, std::chrono::milliseconds max_wait)
      : socket_(std::move(socket)), timer_(socket_.get_executor()), max_wait_(max_wait) {}

  void Start() {
    boost::system::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_send, ec);
    if (ec) return Close();
    timer_.expires_after(max_wait_);
    timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (!ec) self->Close();
    });
    Discard();
  }

 private:
  void Discard() {
    socket_.async_read_some(net::buffer(scratch_),
                            [self = shared_from_this()](boost::system::error_code ec, size_t) {
                              if (ec) return self->Close();
                              self->Discard();
                            });
  }

  void Close() {
    boost::system::error_code ignored;
    timer_.cancel();
    socket_.close(ignored);
  }

  tcp::socket socket_;
  net::steady_timer timer_;
  const std::chrono::milliseconds max_wait_;
  std::array<char, 4096> scratch_;
};

constexpr std::string_view kOverloaded =
    "HTTP/1.1 503 Service Unavailable\r\n"
    "Content-Type: text/plain; charset=utf-8\r\n"
    "Content-Length: 29\r\n"
    "Connection: close\r\n"
    "Retry-After: 1\r\n"
    "\r\n"
    "server at connection capacity";

constexpr std::chrono::milliseconds kRejectLinger{1000};

}  // namespace

void LingerAndClose(tcp::socket socket, std::chrono::milliseconds max_wait) {
  std::make_shared<Lingerer>(std::move(socket), max_wait)->Start();
}

void RejectOverloaded(tcp::socket socket) {
  auto owned = std::make_shared<tcp::socket>(std::move(socket));
  net::async_write(*owned, net::buffer(kOverloaded.data(), kOverloaded.size()),
                   [owned](boost::system::error_code ec, size_t) {
                     if (ec) {
                       boost::system::error_code ignored;
                       owned->close(ignored);
                       return;
                     }
                     LingerAndClose(std::move(*owned), kRejectLinger);
                   });
}

}  // namespace tandem::http::internal
