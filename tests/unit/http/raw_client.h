#pragma once

// A deliberately dumb HTTP/1.1 client on a raw socket, so tests control every byte and timing
// (partial headers, stalls, abrupt closes) and read streams incrementally. Every read is bounded.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace tandem::http::testing {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct RawResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // Lower-cased names.
  std::string body;

  std::string Header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

class RawClient {
 public:
  static std::unique_ptr<RawClient> Connect(uint16_t port) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return nullptr;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      ::close(fd);
      return nullptr;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return std::unique_ptr<RawClient>(new RawClient(fd));
  }

  ~RawClient() { Close(); }

  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  bool Send(std::string_view bytes) {
    while (!bytes.empty()) {
      ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // Status line and headers; body bytes that arrived with them stay buffered.
  std::optional<RawResponse> ReadHead(milliseconds timeout = milliseconds(5000)) {
    const auto deadline = Clock::now() + timeout;
    size_t end;
    while ((end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill(deadline)) return std::nullopt;
    }
    std::string head = buffer_.substr(0, end);
    buffer_.erase(0, end + 4);
    RawResponse response;
    size_t line_end = head.find("\r\n");
    std::string status_line = head.substr(0, line_end);
    if (status_line.rfind("HTTP/1.1 ", 0) != 0 || status_line.size() < 12) return std::nullopt;
    response.status = std::stoi(status_line.substr(9, 3));
    while (line_end != std::string::npos) {
      size_t start = line_end + 2;
      line_end = head.find("\r\n", start);
      std::string line = head.substr(start, line_end == std::string::npos ? std::string::npos
                                                                          : line_end - start);
      size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string name = line.substr(0, colon);
      std::transform(name.begin(), name.end(), name.begin(),
                     [](unsigned char c) { return std::tolower(c); });
      size_t value_start = line.find_first_not_of(' ', colon + 1);
      response.headers[name] = value_start == std::string::npos ? "" : line.substr(value_start);
    }
    return response;
  }

  // A whole response: Content-Length, chunked, or (for 1xx-less close-delimited) none.
  std::optional<RawResponse> ReadResponse(milliseconds timeout = milliseconds(5000)) {
    const auto deadline = Clock::now() + timeout;
    auto response = ReadHead(timeout);
    if (!response) return std::nullopt;
    if (response->Header("transfer-encoding") == "chunked") {
      for (;;) {
        auto chunk = ReadChunk(Remaining(deadline));
        if (!chunk) return std::nullopt;
        if (chunk->empty()) break;
        response->body += *chunk;
      }
      return response;
    }
    const size_t length = std::stoul("0" + response->Header("content-length"));
    while (buffer_.size() < length) {
      if (!Fill(deadline)) return std::nullopt;
    }
    response->body = buffer_.substr(0, length);
    buffer_.erase(0, length);
    return response;
  }

  // The next chunk's data; "" for the terminal chunk; nullopt on timeout, close or bad framing.
  std::optional<std::string> ReadChunk(milliseconds timeout = milliseconds(5000)) {
    const auto deadline = Clock::now() + timeout;
    size_t line_end;
    while ((line_end = buffer_.find("\r\n")) == std::string::npos) {
      if (!Fill(deadline)) return std::nullopt;
    }
    size_t size = std::stoul(buffer_.substr(0, line_end), nullptr, 16);
    while (buffer_.size() < line_end + 2 + size + 2) {
      if (!Fill(deadline)) return std::nullopt;
    }
    std::string data = buffer_.substr(line_end + 2, size);
    if (buffer_.compare(line_end + 2 + size, 2, "\r\n") != 0) return std::nullopt;
    buffer_.erase(0, line_end + 2 + size + 2);
    return data;
  }

  // The next SSE event block (without its blank line) from a chunked event stream; nullopt when
  // the stream ends, times out or closes first.
  std::optional<std::string> ReadEvent(milliseconds timeout = milliseconds(5000)) {
    const auto deadline = Clock::now() + timeout;
    size_t end;
    while ((end = events_.find("\n\n")) == std::string::npos) {
      auto chunk = ReadChunk(Remaining(deadline));
      if (!chunk || chunk->empty()) return std::nullopt;
      events_ += *chunk;
    }
    std::string event = events_.substr(0, end);
    events_.erase(0, end + 2);
    return event;
  }

  // True when the server closes the connection (EOF or reset) within `timeout`; bytes it sends
  // meanwhile are kept.
  bool WaitForClose(milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (Fill(deadline)) {
    }
    return closed_;
  }

  bool closed() const { return closed_; }
  const std::string& buffered() const { return buffer_; }

 private:
  explicit RawClient(int fd) : fd_(fd) {}

  static milliseconds Remaining(Clock::time_point deadline) {
    return std::max(milliseconds(0),
                    std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
  }

  // Appends whatever arrives before `deadline`; false on timeout or close.
  bool Fill(Clock::time_point deadline) {
    if (closed_) return false;
    pollfd pfd{fd_, POLLIN, 0};
    int ready = ::poll(&pfd, 1, static_cast<int>(Remaining(deadline).count()));
    if (ready <= 0) return false;
    char data[16384];
    ssize_t n = ::recv(fd_, data, sizeof(data), 0);
    if (n <= 0) {
      closed_ = true;
      return false;
    }
    buffer_.append(data, static_cast<size_t>(n));
    return true;
  }

  int fd_;
  bool closed_ = false;
  std::string buffer_;
  std::string events_;
};

}  // namespace tandem::http::testing
