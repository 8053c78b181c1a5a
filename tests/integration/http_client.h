#pragma once

// A minimal HTTP/1.1 client over raw loopback sockets for multi-process tests: one request per
// connection, chunked bodies decoded, and an incremental reader for SSE streams that the test
// can abandon mid-stream (to act as a client that disconnects).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

namespace tandem::testing {

struct HttpResponse {
  int status = 0;  // 0: no response (connection failed or closed early)
  std::string headers;
  std::string body;
};

class HttpConnection {
 public:
  explicit HttpConnection(int port, int recv_timeout_s = 30) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    timeval tv{recv_timeout_s, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      connect_errno_ = errno;
      Close();
    }
  }
  int connect_errno() const { return connect_errno_; }
  int last_errno() const { return last_errno_; }  // of the read that failed; 0: EOF
  ~HttpConnection() { Close(); }
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  bool ok() const { return fd_ >= 0; }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  bool Send(const std::string& data) {
    std::size_t off = 0;
    while (fd_ >= 0 && off < data.size()) {
      const ssize_t n = ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<std::size_t>(n);
    }
    return off == data.size();
  }

  bool SendRequest(const std::string& method, const std::string& path, const std::string& body) {
    std::string req = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
    if (!body.empty()) {
      req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
             "\r\n";
    }
    return Send(req + "\r\n" + body);
  }

  // Reads the status line and headers. False on EOF/timeout.
  bool ReadHead(HttpResponse* r) {
    while (buf_.find("\r\n\r\n") == std::string::npos) {
      if (!Fill()) return false;
    }
    const auto end = buf_.find("\r\n\r\n");
    r->headers = buf_.substr(0, end);
    buf_.erase(0, end + 4);
    r->status = std::atoi(r->headers.c_str() + r->headers.find(' ') + 1);
    chunked_ = r->headers.find("chunked") != std::string::npos;
    return true;
  }

  // Next piece of body (one chunk when chunked); empty at the end of the body.
  std::string ReadBodyPiece() {
    if (!chunked_) {
      if (buf_.empty() && !Fill()) return "";
      std::string out;
      out.swap(buf_);
      return out;
    }
    while (buf_.find("\r\n") == std::string::npos) {
      if (!Fill()) return "";
    }
    const std::size_t size = std::strtoul(buf_.c_str(), nullptr, 16);
    const auto line_end = buf_.find("\r\n");
    if (size == 0) return "";
    while (buf_.size() < line_end + 2 + size + 2) {
      if (!Fill()) return "";
    }
    std::string out = buf_.substr(line_end + 2, size);
    buf_.erase(0, line_end + 2 + size + 2);
    return out;
  }

  std::string ReadWholeBody() {
    std::string body;
    for (std::string piece = ReadBodyPiece(); !piece.empty(); piece = ReadBodyPiece()) {
      body += piece;
    }
    return body;
  }

 private:
  bool Fill() {
    if (fd_ < 0) return false;
    char tmp[8192];
    ssize_t n;
    do {
      n = ::recv(fd_, tmp, sizeof(tmp), 0);
    } while (n < 0 && errno == EINTR);  // a signal to the test (a child stopping) is no EOF
    if (n <= 0) {
      last_errno_ = n < 0 ? errno : 0;
      return false;
    }
    buf_.append(tmp, static_cast<std::size_t>(n));
    return true;
  }

  int fd_ = -1;
  int connect_errno_ = 0;
  int last_errno_ = 0;
  std::string buf_;
  bool chunked_ = false;
};

inline HttpResponse HttpRequest(int port, const std::string& method, const std::string& path,
                                const std::string& body = "") {
  HttpConnection c(port);
  HttpResponse r;
  if (!c.ok()) {
    r.body = std::string("connect: ") + std::strerror(c.connect_errno());
    return r;
  }
  if (!c.SendRequest(method, path, body)) {
    r.body = "send failed";
    return r;
  }
  if (!c.ReadHead(&r)) {
    r.body = std::string("no response head: ") +
             (c.last_errno() == 0 ? "EOF" : std::strerror(c.last_errno()));
    return r;
  }
  r.body = c.ReadWholeBody();
  return r;
}

// The JSON payloads of the "data: ..." lines of an SSE body, in order ("[DONE]" included).
inline std::vector<std::string> SseData(const std::string& body) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    const auto end = body.find('\n', pos);
    out.push_back(body.substr(pos + 6, end - pos - 6));
    pos = end;
  }
  return out;
}

}  // namespace tandem::testing
