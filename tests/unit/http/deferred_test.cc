#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "raw_client.h"
#include "tandem/http/server.h"
#include "test_handlers.h"

namespace tandem::http {
namespace {

using std::chrono::milliseconds;
using testing::RawClient;

constexpr char kSlowRequest[] = "GET /slow HTTP/1.1\r\nHost: t\r\n\r\n";

// Hands each deferred handler's responder to the test, which answers it later.
class ResponderBox {
 public:
  void Put(std::shared_ptr<Responder> r) {
    absl::MutexLock lock(&mu_);
    responder_ = std::move(r);
  }
  std::shared_ptr<Responder> Take(absl::Duration timeout = absl::Seconds(5)) {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(
        absl::Condition(+[](std::shared_ptr<Responder>* r) { return *r != nullptr; }, &responder_),
        timeout);
    return std::exchange(responder_, nullptr);
  }

 private:
  absl::Mutex mu_;
  std::shared_ptr<Responder> responder_;
};

std::unique_ptr<Server> StartDeferring(ResponderBox* box) {
  ServerConfig config;
  config.io_threads = 1;  // a handler holding the only I/O thread would stall everything
  Router router;
  EXPECT_TRUE(router
                  .Handle("GET", "/slow",
                          [box](const Request&) -> HandlerResult {
                            return DeferredResponse{[box](std::shared_ptr<Responder> r) { box->Put(r); }};
                          })
                  .ok());
  EXPECT_TRUE(router.Handle("GET", "/ok", testing::Fixed("fine")).ok());
  return Server::Start(std::move(config), std::move(router)).value();
}

TEST(DeferredTest, AnsweredFromAnotherThreadWithoutHoldingTheIoThread) {
  ResponderBox box;
  auto server = StartDeferring(&box);
  auto slow = RawClient::Connect(server->port());
  ASSERT_TRUE(slow->Send(kSlowRequest));
  auto responder = box.Take();
  ASSERT_NE(responder, nullptr);

  // The single I/O thread still serves others while /slow waits.
  auto other = RawClient::Connect(server->port());
  ASSERT_TRUE(other->Send("GET /ok HTTP/1.1\r\nHost: t\r\n\r\n"));
  auto ok = other->ReadResponse();
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(ok->body, "fine");
  EXPECT_FALSE(slow->ReadHead(milliseconds(100)).has_value());

  std::thread([&] {
    Response r = Response::Json(201, "{\"done\":true}");
    r.headers.emplace_back("X-Late", "yes");
    responder->Respond(std::move(r));
    responder->Respond(Response::Text(500, "ignored"));
  }).join();
  auto answer = slow->ReadResponse();
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->status, 201);
  EXPECT_EQ(answer->body, "{\"done\":true}");
  EXPECT_EQ(answer->Header("x-late"), "yes");
  EXPECT_FALSE(responder->cancelled());

  // The connection is kept alive for the next request.
  ASSERT_TRUE(slow->Send("GET /ok HTTP/1.1\r\nHost: t\r\n\r\n"));
  auto again = slow->ReadResponse();
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->body, "fine");
}

// A /slow request left pending on `server`: its client and responder, and a notification of its
// cancellation.
struct Pending {
  std::unique_ptr<RawClient> client;
  std::shared_ptr<Responder> responder;
  std::shared_ptr<absl::Notification> cancelled = std::make_shared<absl::Notification>();
};

Pending StartPending(Server* server, ResponderBox* box) {
  Pending p;
  p.client = RawClient::Connect(server->port());
  EXPECT_TRUE(p.client->Send(kSlowRequest));
  p.responder = box->Take();
  EXPECT_NE(p.responder, nullptr);
  if (p.responder) p.responder->OnCancel([n = p.cancelled] { n->Notify(); });
  return p;
}

TEST(DeferredTest, ClientDisconnectCancelsTheResponder) {
  ResponderBox box;
  auto server = StartDeferring(&box);
  Pending p = StartPending(server.get(), &box);
  ASSERT_NE(p.responder, nullptr);
  auto& responder = p.responder;
  auto& cancelled = *p.cancelled;
  p.client->Close();
  EXPECT_TRUE(cancelled.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_TRUE(responder->cancelled());
  responder->Respond(Response::Text(200, "too late"));  // harmless
  std::atomic<bool> ran{false};
  responder->OnCancel([&] { ran = true; });
  EXPECT_TRUE(ran) << "a callback added after cancellation runs at once";
}

TEST(DeferredTest, CanAnswerWithAStreamThatIsWatchedForDisconnects) {
  ResponderBox box;
  auto server = StartDeferring(&box);
  Pending p = StartPending(server.get(), &box);
  ASSERT_NE(p.responder, nullptr);
  absl::Notification opened;
  std::shared_ptr<SseWriter> writer;
  SseResponse sse;
  sse.headers.emplace_back("X-Stream", "late");
  sse.on_open = [&](std::shared_ptr<SseWriter> w) {
    writer = std::move(w);
    opened.Notify();
  };
  p.responder->RespondStream(std::move(sse));
  auto head = p.client->ReadHead();
  ASSERT_TRUE(head.has_value());
  EXPECT_EQ(head->status, 200);
  EXPECT_EQ(head->Header("content-type"), "text/event-stream");
  EXPECT_EQ(head->Header("x-stream"), "late");
  ASSERT_TRUE(opened.WaitForNotificationWithTimeout(absl::Seconds(5)));
  ASSERT_TRUE(writer->TryWrite({.data = "one"}).ok());
  auto event = p.client->ReadEvent();
  ASSERT_TRUE(event.has_value());
  EXPECT_EQ(*event, "data: one");
  EXPECT_FALSE(p.cancelled->HasBeenNotified()) << "answered: the responder is no longer cancelled";

  absl::Notification stream_cancelled;
  writer->OnCancel([&] { stream_cancelled.Notify(); });
  p.client->Close();
  EXPECT_TRUE(stream_cancelled.WaitForNotificationWithTimeout(absl::Seconds(5)));
}

// A deferred stream's head and its first event leave back to back (the router answers once the
// first token exists). With Nagle's algorithm on the server's socket the event waits for the
// ACK of the head, which a client delays (up to 40 ms on Linux) once the connection has seen a
// few request/response exchanges: the first token then reaches the client one ACK timer late.
// The smallest gap of a few tries stays far below that timer when the socket sends at once.
TEST(DeferredTest, FirstEventIsNotHeldBehindTheHeadsAck) {
  ResponderBox box;
  auto server = StartDeferring(&box);
  auto client = RawClient::Connect(server->port());
  ASSERT_NE(client, nullptr);
  // Exchanges that put the client's side of the connection in delayed-ACK (interactive) mode.
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(client->Send("GET /ok HTTP/1.1\r\nHost: t\r\n\r\n"));
    auto ok = client->ReadResponse();
    ASSERT_TRUE(ok.has_value());
    ASSERT_EQ(ok->status, 200);
  }
  auto smallest = milliseconds::max();
  for (int attempt = 0; attempt < 4; ++attempt) {
    ASSERT_TRUE(client->Send(kSlowRequest));
    std::shared_ptr<Responder> responder = box.Take();
    ASSERT_NE(responder, nullptr);
    SseResponse sse;
    sse.on_open = [](std::shared_ptr<SseWriter> w) {
      EXPECT_TRUE(w->TryWrite({.data = "first"}).ok());
      w->Close();
    };
    responder->RespondStream(std::move(sse));
    ASSERT_TRUE(client->ReadHead().has_value());
    const auto head_at = testing::Clock::now();
    auto event = client->ReadEvent();
    ASSERT_TRUE(event.has_value());
    EXPECT_EQ(*event, "data: first");
    smallest = std::min(smallest, std::chrono::duration_cast<milliseconds>(
                                      testing::Clock::now() - head_at));
    // The rest of the stream (the closing chunk), so the connection is ready for the next one.
    ASSERT_TRUE(client->ReadChunk().has_value());
  }
  EXPECT_LT(smallest.count(), 20) << "the first event waited for the head's ACK (Nagle)";
}

TEST(DeferredTest, DroppedResponderAnswers500) {
  Router router;
  ASSERT_TRUE(router
                  .Handle("GET", "/slow",
                          [](const Request&) -> HandlerResult {
                            return DeferredResponse{[](std::shared_ptr<Responder>) {}};
                          })
                  .ok());
  auto server = Server::Start(ServerConfig{}, std::move(router)).value();
  auto client = RawClient::Connect(server->port());
  ASSERT_TRUE(client->Send(kSlowRequest));
  auto response = client->ReadResponse();
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->status, 500);
}

TEST(DeferredTest, ShutdownCancelsAPendingResponder) {
  ResponderBox box;
  auto server = StartDeferring(&box);
  Pending p = StartPending(server.get(), &box);
  ASSERT_NE(p.responder, nullptr);
  server->Shutdown(absl::Milliseconds(100));
  EXPECT_TRUE(p.cancelled->HasBeenNotified());
  EXPECT_TRUE(p.client->WaitForClose(milliseconds(2000)));
}

// Each deferred request leaves a disconnect watch (a read) on its socket, cancelled when the
// answer comes. With several I/O threads the cancelled read's completion can reach the
// connection's strand late, after the answer is written and the client's next request has
// arrived; it must not be taken for a disconnect of that next request. Many connections, each
// alternating plain and streamed deferred answers on one keep-alive socket, make that ordering
// likely enough to catch.
TEST(DeferredTest, KeepAliveSurvivesTheCancelledWatchOfTheRequestBefore) {
  ServerConfig config;
  config.io_threads = 8;
  Router router;
  ASSERT_TRUE(router
                  .Handle("GET", "/plain",
                          [](const Request&) -> HandlerResult {
                            return DeferredResponse{[](std::shared_ptr<Responder> r) {
                              r->Respond(Response::Text(200, "plain"));
                            }};
                          })
                  .ok());
  ASSERT_TRUE(router
                  .Handle("GET", "/stream",
                          [](const Request&) -> HandlerResult {
                            return DeferredResponse{[](std::shared_ptr<Responder> r) {
                              SseResponse sse;
                              sse.on_open = [](std::shared_ptr<SseWriter> w) {
                                (void)w->TryWrite(SseEvent{.data = "event"});
                                w->Close();
                              };
                              r->RespondStream(std::move(sse));
                            }};
                          })
                  .ok());
  auto server = Server::Start(std::move(config), std::move(router)).value();
  constexpr int kConnections = 16;
  constexpr int kRounds = 2000;
  std::atomic<int> failures{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kConnections; ++c) {
    clients.emplace_back([&] {
      auto client = RawClient::Connect(server->port());
      for (int round = 0; round < kRounds && client; ++round) {
        const bool stream = round % 2 == 1;
        if (!client->Send(stream ? "GET /stream HTTP/1.1\r\nHost: t\r\n\r\n"
                                 : "GET /plain HTTP/1.1\r\nHost: t\r\n\r\n") ||
            !client->ReadResponse().has_value()) {
          ++failures;
          return;
        }
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(failures.load(), 0) << "connections closed without an answer";
}

}  // namespace
}  // namespace tandem::http
