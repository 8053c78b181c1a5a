// The fetcher against a tiny HTTP server on loopback: the connect-time address check (a host on
// the allow-list that resolves to loopback is refused), redirects checked hop by hop, the size
// and time limits.
#include "tandem/image/fetch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "image_test_util.h"

namespace tandem::image {
namespace {

using testing::ExpectImageError;

// Answers each connection by the request path: /ok (a small body), /big (64 KiB), /slow (waits
// 1.5 s), /redirect-ok (302 to /ok), /redirect-away (302 to a host off the allow-list),
// /missing (404).
class TinyServer {
 public:
  TinyServer() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    listen(fd_, 16);
    socklen_t len = sizeof(a);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~TinyServer() {
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
  }
  int port() const { return port_; }

 private:
  void Serve() {
    while (!stop_) {
      const int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      char buf[4096];
      const ssize_t n = read(c, buf, sizeof(buf));
      const std::string request(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
      const std::string path = request.substr(4, request.find(' ', 4) - 4);
      std::string response;
      if (path == "/ok") {
        response = Reply("200 OK", "", "GIF89a-image-bytes");
      } else if (path == "/big") {
        response = Reply("200 OK", "", std::string(64 << 10, 'x'));
      } else if (path == "/slow") {
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        response = Reply("200 OK", "", "late");
      } else if (path == "/redirect-ok") {
        response = Reply("302 Found", absl::StrCat("Location: http://localhost:", port_, "/ok\r\n"), "");
      } else if (path == "/redirect-away") {
        response = Reply("302 Found", "Location: http://elsewhere.example/x\r\n", "");
      } else {
        response = Reply("404 Not Found", "", "");
      }
      (void)!write(c, response.data(), response.size());
      close(c);
    }
  }
  static std::string Reply(const char* status, const std::string& headers, const std::string& body) {
    return absl::StrCat("HTTP/1.1 ", status, "\r\n", headers, "Content-Length: ", body.size(),
                        "\r\nConnection: close\r\n\r\n", body);
  }
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

UrlPolicy LocalPolicy() {
  UrlPolicy p;
  p.fetch_enabled = true;
  p.allowed_hosts = {"localhost"};
  p.max_bytes = 1024;
  p.timeout = absl::Milliseconds(500);
  return p;
}

bool AnyAddress(const sockaddr*) { return true; }

TEST(ImageFetcher, RefusesAnAllowedHostThatResolvesToLoopbackAtConnectTime) {
  TinyServer server;
  ImageFetcher fetcher(LocalPolicy(), 8192);  // the default filter: public addresses only
  absl::Status s = fetcher.Fetch(absl::StrCat("http://localhost:", server.port(), "/ok")).status();
  ExpectImageError(s, ImageErrorKind::kDestinationRejected);
  EXPECT_NE(s.message().find("loopback"), absl::string_view::npos) << s;
}

TEST(ImageFetcher, FetchesFollowsCheckedRedirectsAndEnforcesLimits) {
  TinyServer server;
  ImageFetcher fetcher(LocalPolicy(), 8192);
  fetcher.set_address_filter(AnyAddress);
  const std::string base = absl::StrCat("http://localhost:", server.port());
  absl::StatusOr<std::string> body = fetcher.Fetch(base + "/ok");
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ(*body, "GIF89a-image-bytes");
  body = fetcher.Fetch(base + "/redirect-ok");
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ(*body, "GIF89a-image-bytes");
  ExpectImageError(fetcher.Fetch(base + "/redirect-away").status(),
                   ImageErrorKind::kDestinationRejected);
  ExpectImageError(fetcher.Fetch(base + "/big").status(), ImageErrorKind::kImageTooLarge);
  ExpectImageError(fetcher.Fetch(base + "/missing").status(), ImageErrorKind::kFetch);
  const auto start = std::chrono::steady_clock::now();
  ExpectImageError(fetcher.Fetch(base + "/slow").status(), ImageErrorKind::kFetch);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1200));
}

TEST(ImageFetcher, OffByDefault) {
  ImageFetcher fetcher(UrlPolicy{}, 8192);
  ExpectImageError(fetcher.Fetch("https://images.example.com/a.png").status(),
                   ImageErrorKind::kDestinationRejected);
}

}  // namespace
}  // namespace tandem::image
