#pragma once

// A blocking HTTP/1.1 GET over a raw loopback socket: enough for scraping /metrics in tests
// without pulling an HTTP client library into them.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace tandem::testing {

// The response body, or an empty string when the server cannot be reached.
inline std::string HttpGet(int port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return "";
  }
  const std::string req =
      "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  if (::send(fd, req.data(), req.size(), 0) != static_cast<ssize_t>(req.size())) {
    ::close(fd);
    return "";
  }
  std::string resp;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    resp.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  const auto body = resp.find("\r\n\r\n");
  return body == std::string::npos ? "" : resp.substr(body + 4);
}

// The value of the first sample of `metric` in a Prometheus text page (labels ignored); -1 if
// absent.
inline double MetricValue(const std::string& page, const std::string& metric) {
  std::size_t pos = 0;
  while ((pos = page.find(metric, pos)) != std::string::npos) {
    const bool line_start = pos == 0 || page[pos - 1] == '\n';
    const char next = pos + metric.size() < page.size() ? page[pos + metric.size()] : '\0';
    if (line_start && (next == '{' || next == ' ')) {
      const auto eol = page.find('\n', pos);
      const auto space = page.rfind(' ', eol);
      return std::strtod(page.c_str() + space + 1, nullptr);
    }
    pos += metric.size();
  }
  return -1;
}

}  // namespace tandem::testing
