#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "raw_client.h"
#include "test_handlers.h"
#include "tandem/http/server.h"

namespace tandem::http {
namespace {

using std::chrono::milliseconds;
using testing::Clock;
using testing::RawClient;

std::unique_ptr<Server> StartWith(ServerConfig config) {
  Router router;
  EXPECT_TRUE(router
                  .Handle("POST", "/upload",
                          [](const Request& request) -> HandlerResult {
                            return Response::Text(200, std::to_string(request.body.size()));
                          })
                  .ok());
  EXPECT_TRUE(router.Handle("GET", "/ok", testing::Fixed("ok")).ok());
  return Server::Start(std::move(config), std::move(router)).value();
}

std::string Post(size_t declared, const std::string& body) {
  return "POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: " + std::to_string(declared) +
         "\r\n\r\n" + body;
}

TEST(LimitsTest, BodyAtTheLimitIsAccepted) {
  ServerConfig config;
  config.max_body_bytes = 1024;
  auto server = StartWith(config);
  auto client = RawClient::Connect(server->port());
  ASSERT_TRUE(client->Send(Post(1024, std::string(1024, 'x'))));
  auto response = client->ReadResponse();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "1024");
}

TEST(LimitsTest, DeclaredOversizedBodyIs413AndClosed) {
  ServerConfig config;
  config.max_body_bytes = 1024;
  auto server = StartWith(config);
  auto client = RawClient::Connect(server->port());
  // The client has already sent part of its body: the 413 must still reach it.
  ASSERT_TRUE(client->Send(Post(5000, std::string(3000, 'x'))));
  auto response = client->ReadResponse();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->status, 413);
  EXPECT_EQ(response->Header("connection"), "close");
  EXPECT_TRUE(client->WaitForClose(milliseconds(5000)));
}

TEST(LimitsTest, ChunkedBodyGrowingPastTheLimitIs413) {
  ServerConfig config;
  config.max_body_bytes = 1024;
  auto server = StartWith(config);
  auto client = RawClient::Connect(server->port());
  std::string request = "POST /upload HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 4; ++i) request += "200\r\n" + std::string(512, 'y') + "\r\n";
  request += "0\r\n\r\n";
  ASSERT_TRUE(client->Send(request));
  auto response = client->ReadResponse();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->status, 413);
}

TEST(LimitsTest, MalformedRequestIs400) {
  auto server = StartWith(ServerConfig());
  for (const char* bad : {"NOT AN HTTP REQUEST\r\n\r\n", "GET /ok HTTP/1.1\r\nBad Header\r\n\r\n",
                          "POST /upload HTTP/1.1\r\nContent-Length: abc\r\n\r\n",
                          // Ambiguous framing is how requests get smuggled past proxies.
                          "POST /upload HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
                          "POST /upload HTTP/1.1\r\nContent-Length: 3\r\n"
                          "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"}) {
    auto client = RawClient::Connect(server->port());
    ASSERT_TRUE(client->Send(bad));
    auto response = client->ReadResponse();
    ASSERT_TRUE(response.has_value()) << bad;
    EXPECT_EQ(response->status, 400) << bad;
    EXPECT_TRUE(client->WaitForClose(milliseconds(5000))) << bad;
  }
}

TEST(LimitsTest, OversizedHeadersAre431) {
  ServerConfig config;
  config.max_header_bytes = 1024;
  auto server = StartWith(config);
  auto client = RawClient::Connect(server->port());
  ASSERT_TRUE(client->Send("GET /ok HTTP/1.1\r\nHost: t\r\nX-Big: " + std::string(4000, 'z') +
                           "\r\n\r\n"));
  auto response = client->ReadResponse();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->status, 431);
}

TEST(LimitsTest, SlowLorisIsDisconnectedAfterTheHeaderTimeout) {
  ServerConfig config;
  config.header_timeout = absl::Milliseconds(300);
  auto server = StartWith(config);
  auto client = RawClient::Connect(server->port());
  const auto start = Clock::now();
  ASSERT_TRUE(client->Send("GET /ok HTTP/1.1\r\nHost: t\r\n"));
  // Trickling bytes must not extend the deadline: it covers the whole header.
  for (int i = 0; i < 10 && !client->closed(); ++i) {
    client->Send("X");
    client->WaitForClose(milliseconds(100));
  }
  EXPECT_TRUE(client->WaitForClose(milliseconds(3000)));
  const auto elapsed = Clock::now() - start;
  EXPECT_GE(elapsed, milliseconds(250));
  EXPECT_LT(elapsed, milliseconds(3000));
  EXPECT_EQ(client->buffered(), "");  // Dropped, not answered.
}

TEST(LimitsTest, SilentConnectionIsDroppedAfterTheHeaderTimeout) {
  ServerConfig config;
  config.header_timeout = absl::Milliseconds(200);
  auto server = StartWith(config);
  auto client = RawClient::Connect(server->port());
  EXPECT_TRUE(client->WaitForClose(milliseconds(3000)));
}

TEST(LimitsTest, IdleKeepAliveConnectionIsClosed) {
  ServerConfig config;
  config.idle_timeout = absl::Milliseconds(300);
  auto server = StartWith(config);
  auto client = RawClient::Connect(server->port());
  ASSERT_TRUE(client->Send("GET /ok HTTP/1.1\r\nHost: t\r\n\r\n"));
  ASSERT_TRUE(client->ReadResponse().has_value());
  const auto start = Clock::now();
  EXPECT_TRUE(client->WaitForClose(milliseconds(3000)));
  EXPECT_GE(Clock::now() - start, milliseconds(250));
}

TEST(LimitsTest, ConnectionsOverTheLimitGet503) {
  ServerConfig config;
  config.max_connections = 2;
  auto server = StartWith(config);
  std::vector<std::unique_ptr<RawClient>> held;
  for (int i = 0; i < 2; ++i) {
    held.push_back(RawClient::Connect(server->port()));
    ASSERT_TRUE(held.back()->Send("GET /ok HTTP/1.1\r\nHost: t\r\n\r\n"));
    ASSERT_EQ(held.back()->ReadResponse()->status, 200);
  }
  auto extra = RawClient::Connect(server->port());
  ASSERT_NE(extra, nullptr);
  ASSERT_TRUE(extra->Send("GET /ok HTTP/1.1\r\nHost: t\r\n\r\n"));
  auto response = extra->ReadResponse();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->status, 503);
  EXPECT_TRUE(extra->WaitForClose(milliseconds(3000)));

  // Capacity comes back once a held connection goes.
  held.pop_back();
  const auto deadline = Clock::now() + milliseconds(3000);
  while (server->active_connections() > 1 && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  auto again = RawClient::Connect(server->port());
  ASSERT_TRUE(again->Send("GET /ok HTTP/1.1\r\nHost: t\r\n\r\n"));
  EXPECT_EQ(again->ReadResponse()->status, 200);
}

}  // namespace
}  // namespace tandem::http
