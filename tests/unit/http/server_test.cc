#include "tandem/http/server.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "raw_client.h"

namespace tandem::http {
namespace {

using ::testing::HasSubstr;
using testing::RawClient;

// Answers with what it saw, so tests check the parsed request end to end.
Router EchoRouter() {
  Router router;
  auto echo = [](const Request& request) -> HandlerResult {
    Response response = Response::Text(
        200, request.method + " " + request.path + " q=" + request.query + " body=" + request.body);
    response.headers.emplace_back("X-Seen-Trace",
                                  std::string(request.FindHeader("x-trace").value_or("-")));
    response.headers.emplace_back("X-Seen-Peer", request.remote_address);
    return response;
  };
  EXPECT_TRUE(router.Handle("GET", "/echo", echo).ok());
  EXPECT_TRUE(router.Handle("POST", "/echo", echo).ok());
  EXPECT_TRUE(router
                  .Handle("GET", "/throw",
                          [](const Request&) -> HandlerResult { throw std::runtime_error("boom"); })
                  .ok());
  return router;
}

std::unique_ptr<Server> StartEcho(ServerConfig config = {}) {
  return Server::Start(std::move(config), EchoRouter()).value();
}

TEST(ServerTest, BindsAnEphemeralPort) {
  auto server = StartEcho();
  EXPECT_NE(server->port(), 0);
}

TEST(ServerTest, KeepAliveServesTwoRequestsOnOneConnection) {
  auto server = StartEcho();
  auto client = RawClient::Connect(server->port());
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Send("GET /echo?a=1 HTTP/1.1\r\nHost: t\r\nX-Trace: abc\r\n\r\n"));
  auto first = client->ReadResponse();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->status, 200);
  EXPECT_EQ(first->body, "GET /echo q=a=1 body=");
  EXPECT_EQ(first->Header("x-seen-trace"), "abc");
  EXPECT_EQ(first->Header("content-type"), "text/plain; charset=utf-8");
  EXPECT_THAT(first->Header("x-seen-peer"), ::testing::StartsWith("127.0.0.1:"));

  ASSERT_TRUE(client->Send("GET /echo HTTP/1.1\r\nHost: t\r\n\r\n"));
  auto second = client->ReadResponse();
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->body, "GET /echo q= body=");
  EXPECT_EQ(server->active_connections(), 1u);
}

TEST(ServerTest, PipelinedRequestsAreAnsweredInOrder) {
  auto server = StartEcho();
  auto client = RawClient::Connect(server->port());
  ASSERT_TRUE(client->Send("GET /echo?n=1 HTTP/1.1\r\nHost: t\r\n\r\n"
                           "GET /echo?n=2 HTTP/1.1\r\nHost: t\r\n\r\n"));
  EXPECT_THAT(client->ReadResponse()->body, HasSubstr("q=n=1"));
  EXPECT_THAT(client->ReadResponse()->body, HasSubstr("q=n=2"));
}

TEST(ServerTest, PostBodyReachesTheHandler) {
  auto server = StartEcho();
  auto client = RawClient::Connect(server->port());
  const std::string body = "{\"prompt\": \"hello\"}";
  ASSERT_TRUE(client->Send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: " +
                           std::to_string(body.size()) + "\r\n\r\n" + body));
  auto response = client->ReadResponse();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->body, "POST /echo q= body=" + body);
}

TEST(ServerTest, ChunkedRequestBodyIsReassembled) {
  auto server = StartEcho();
  auto client = RawClient::Connect(server->port());
  ASSERT_TRUE(client->Send(
      "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
      "3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n"));
  EXPECT_EQ(client->ReadResponse()->body, "POST /echo q= body=abcdefg");
}

TEST(ServerTest, ExpectContinueGetsAnInterimResponse) {
  auto server = StartEcho();
  auto client = RawClient::Connect(server->port());
  ASSERT_TRUE(client->Send(
      "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n"));
  auto interim = client->ReadHead();
  ASSERT_TRUE(interim.has_value());
  EXPECT_EQ(interim->status, 100);
  ASSERT_TRUE(client->Send("hi"));
  EXPECT_EQ(client->ReadResponse()->body, "POST /echo q= body=hi");
}

TEST(ServerTest, UnknownPathIs404AndConnectionStaysUsable) {
  auto server = StartEcho();
  auto client = RawClient::Connect(server->port());
  ASSERT_TRUE(client->Send("GET /nope HTTP/1.1\r\nHost: t\r\n\r\n"));
  EXPECT_EQ(client->ReadResponse()->status, 404);
  ASSERT_TRUE(client->Send("GET /echo HTTP/1.1\r\nHost: t\r\n\r\n"));
  EXPECT_EQ(client->ReadResponse()->status, 200);
}

TEST(ServerTest, WrongMethodIs405WithAllow) {
  auto server = StartEcho();
  auto client = RawClient::Connect(server->port());
  ASSERT_TRUE(client->Send("DELETE /echo HTTP/1.1\r\nHost: t\r\n\r\n"));
  auto response = client->ReadResponse();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->status, 405);
  EXPECT_EQ(response->Header("allow"), "GET, POST");
}

TEST(ServerTest, ThrowingHandlerIs500) {
  auto server = StartEcho();
  auto client = RawClient::Connect(server->port());
  ASSERT_TRUE(client->Send("GET /throw HTTP/1.1\r\nHost: t\r\n\r\n"));
  auto response = client->ReadResponse();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->status, 500);
  EXPECT_THAT(response->body, HasSubstr("boom"));
}

TEST(ServerTest, ConnectionCloseIsHonoured) {
  auto server = StartEcho();
  auto client = RawClient::Connect(server->port());
  ASSERT_TRUE(client->Send("GET /echo HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"));
  auto response = client->ReadResponse();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->Header("connection"), "close");
  EXPECT_TRUE(client->WaitForClose(std::chrono::milliseconds(3000)));
}

TEST(ServerTest, ManyConcurrentClientsAllSucceed) {
  ServerConfig config;
  config.io_threads = 4;
  auto server = StartEcho(config);
  constexpr int kClients = 50;
  std::atomic<int> succeeded{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      auto client = RawClient::Connect(server->port());
      if (!client) return;
      const std::string body = "client-" + std::to_string(i);
      for (int round = 0; round < 3; ++round) {
        if (!client->Send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: " +
                          std::to_string(body.size()) + "\r\n\r\n" + body)) {
          return;
        }
        auto response = client->ReadResponse(std::chrono::milliseconds(10000));
        if (!response || response->status != 200 || response->body != "POST /echo q= body=" + body) {
          return;
        }
      }
      succeeded.fetch_add(1);
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(succeeded.load(), kClients);
}

TEST(ServerTest, StartRejectsBadConfig) {
  ServerConfig config;
  config.io_threads = 0;
  EXPECT_EQ(Server::Start(config, Router()).status().code(), absl::StatusCode::kInvalidArgument);
  config = ServerConfig();
  config.header_timeout = absl::ZeroDuration();
  EXPECT_EQ(Server::Start(config, Router()).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ServerTest, StartReportsAPortInUse) {
  auto first = StartEcho();
  ServerConfig config;
  config.port = first->port();
  auto second = Server::Start(config, Router());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(second.status().message()), HasSubstr(std::to_string(first->port())));
}

TEST(ServerTest, ShutdownClosesIdleConnectionsAndIsIdempotent) {
  auto server = StartEcho();
  auto client = RawClient::Connect(server->port());
  ASSERT_TRUE(client->Send("GET /echo HTTP/1.1\r\nHost: t\r\n\r\n"));
  ASSERT_TRUE(client->ReadResponse().has_value());
  server->Shutdown(absl::Seconds(5));
  EXPECT_TRUE(client->WaitForClose(std::chrono::milliseconds(1000)));
  server->Shutdown(absl::Seconds(5));
  EXPECT_EQ(RawClient::Connect(server->port()), nullptr);
}

}  // namespace
}  // namespace tandem::http
