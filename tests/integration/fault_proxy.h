#pragma once

// A TCP proxy for fault injection on a gRPC path: clients dial the proxy, which forwards every
// byte to the target, and a test switches what happens to the bytes while streams are open:
//   kPass  forward as they come;
//   kDelay forward each piece after `delay` (a slow or far path; order is kept);
//   kStall hold every piece, keeping the connections open (a path that hangs without an error);
//   Cut()  reset every open connection (RST) and keep accepting new ones (a middlebox dropping
//          its flows).
// It is protocol-blind: HTTP/2 frames are cut wherever TCP segments them. The listening socket
// is created by the thread that calls Start, so a test can run the proxy inside a network
// namespace (InNetns) and reach a target there.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace tandem::testing {

class FaultProxy {
 public:
  enum class Mode { kPass, kDelay, kStall };

  FaultProxy() = default;
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;
  ~FaultProxy() { Stop(); }

  // Listens on listen_ip:listen_port and forwards to target_ip:target_port. False if it cannot
  // listen.
  bool Start(const std::string& listen_ip, int listen_port, const std::string& target_ip,
             int target_port) {
    target_ip_ = target_ip;
    target_port_ = target_port;
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr = Addr(listen_ip, listen_port);
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::listen(listen_fd_, 128) != 0) {
      ::close(listen_fd_);
      listen_fd_ = -1;
      return false;
    }
    accept_thread_ = std::thread([this] { AcceptLoop(); });
    return true;
  }

  void SetMode(Mode mode, std::chrono::milliseconds delay = std::chrono::milliseconds(0)) {
    delay_ms_ = static_cast<int>(delay.count());
    mode_ = mode;
  }

  // Resets every open connection; new ones are accepted as before.
  void Cut() {
    std::lock_guard<std::mutex> lock(mu_);
    for (int fd : open_fds_) {
      const linger l{1, 0};  // close with RST, as a dropped flow looks to both ends
      ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
      ::shutdown(fd, SHUT_RDWR);
    }
    ++cuts_;
  }

  int connections_accepted() const { return accepted_.load(); }

  void Stop() {
    if (stopping_.exchange(true)) return;
    if (listen_fd_ >= 0) ::shutdown(listen_fd_, SHUT_RDWR);
    if (accept_thread_.joinable()) accept_thread_.join();
    if (listen_fd_ >= 0) ::close(listen_fd_);
    listen_fd_ = -1;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
    }
    std::vector<std::thread> pumps;
    {
      std::lock_guard<std::mutex> lock(mu_);
      pumps.swap(pumps_);
    }
    for (std::thread& t : pumps) t.join();
  }

 private:
  static sockaddr_in Addr(const std::string& ip, int port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
    return a;
  }

  void AcceptLoop() {
    while (!stopping_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) continue;
      // Created on this thread: in the proxy's network namespace.
      const int server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in target = Addr(target_ip_, target_port_);
      if (::connect(server, reinterpret_cast<sockaddr*>(&target), sizeof(target)) != 0) {
        ::close(server);
        ::close(client);
        continue;
      }
      accepted_.fetch_add(1);
      std::lock_guard<std::mutex> lock(mu_);
      open_fds_.insert(client);
      open_fds_.insert(server);
      // Each direction has its own pump; the last one out closes both sockets.
      auto pair = std::make_shared<std::atomic<int>>(2);
      pumps_.emplace_back([this, client, server, pair] { Pump(client, server, pair); });
      pumps_.emplace_back([this, client, server, pair] { Pump(server, client, pair); });
    }
  }

  void Pump(int from, int to, std::shared_ptr<std::atomic<int>> pair) {
    char buf[64 * 1024];
    while (!stopping_) {
      pollfd p{from, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      const ssize_t n = ::recv(from, buf, sizeof(buf), 0);
      if (n <= 0) break;
      while (mode_ == Mode::kStall && !stopping_) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      if (mode_ == Mode::kDelay) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));
      std::size_t off = 0;
      while (off < static_cast<std::size_t>(n)) {
        const ssize_t w = ::send(to, buf + off, static_cast<std::size_t>(n) - off, MSG_NOSIGNAL);
        if (w <= 0) break;
        off += static_cast<std::size_t>(w);
      }
      if (off < static_cast<std::size_t>(n)) break;
    }
    // One direction ended: end the other too (a half-open gRPC connection helps nobody).
    ::shutdown(to, SHUT_RDWR);
    ::shutdown(from, SHUT_RDWR);
    if (pair->fetch_sub(1) == 1) {
      std::lock_guard<std::mutex> lock(mu_);
      open_fds_.erase(from);
      open_fds_.erase(to);
      ::close(from);
      ::close(to);
    }
  }

  std::string target_ip_;
  int target_port_ = 0;
  int listen_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::atomic<Mode> mode_{Mode::kPass};
  std::atomic<int> delay_ms_{0};
  std::atomic<int> accepted_{0};
  std::mutex mu_;
  std::set<int> open_fds_;
  std::thread accept_thread_;
  std::vector<std::thread> pumps_;
  int cuts_ = 0;
};

}  // namespace tandem::testing
