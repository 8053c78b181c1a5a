#include <atomic>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
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

constexpr char kStreamRequest[] = "GET /stream HTTP/1.1\r\nHost: t\r\n\r\n";

// Hands each opened writer to the test, which plays the producer.
class WriterBox {
 public:
  void Put(std::shared_ptr<SseWriter> writer) {
    absl::MutexLock lock(&mu_);
    writer_ = std::move(writer);
  }
  std::shared_ptr<SseWriter> Take(absl::Duration timeout = absl::Seconds(5)) {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(+[](std::shared_ptr<SseWriter>* w) { return *w != nullptr; },
                                         &writer_),
                         timeout);
    return std::exchange(writer_, nullptr);
  }

 private:
  absl::Mutex mu_;
  std::shared_ptr<SseWriter> writer_;
};

std::unique_ptr<Server> StartStreaming(WriterBox* box, ServerConfig config = {}) {
  Router router;
  EXPECT_TRUE(router
                  .Handle("GET", "/stream",
                          [box](const Request&) -> HandlerResult {
                            SseResponse sse;
                            sse.headers.emplace_back("X-Request-Id", "r1");
                            sse.on_open = [box](std::shared_ptr<SseWriter> w) { box->Put(w); };
                            return sse;
                          })
                  .ok());
  EXPECT_TRUE(router.Handle("GET", "/ok", testing::Fixed("ok")).ok());
  return Server::Start(std::move(config), std::move(router)).value();
}

class SseTest : public ::testing::Test {
 protected:
  // Starts a server and opens one stream; the test then plays producer (writer_) and client.
  void Open(ServerConfig config = {}) {
    server_ = StartStreaming(&box_, std::move(config));
    client_ = RawClient::Connect(server_->port());
    ASSERT_NE(client_, nullptr);
    ASSERT_TRUE(client_->Send(kStreamRequest));
    auto head = client_->ReadHead();
    ASSERT_TRUE(head.has_value());
    head_ = *head;
    writer_ = box_.Take();
    ASSERT_NE(writer_, nullptr);
  }

  WriterBox box_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<RawClient> client_;
  testing::RawResponse head_;
  std::shared_ptr<SseWriter> writer_;
};

TEST_F(SseTest, EventsArriveOneByOneAndTheConnectionIsReusedAfterClose) {
  ASSERT_NO_FATAL_FAILURE(Open());
  EXPECT_EQ(head_.status, 200);
  EXPECT_EQ(head_.Header("content-type"), "text/event-stream");
  EXPECT_EQ(head_.Header("transfer-encoding"), "chunked");
  EXPECT_EQ(head_.Header("x-request-id"), "r1");

  // Each event is read before the next is written: delivery is incremental, not at the end.
  for (int i = 0; i < 5; ++i) {
    const std::string payload = "{\"token\": " + std::to_string(i) + "}";
    std::thread producer([&] { EXPECT_TRUE(writer_->TryWrite({.data = payload}).ok()); });
    producer.join();
    auto event = client_->ReadEvent(milliseconds(3000));
    ASSERT_TRUE(event.has_value()) << i;
    EXPECT_EQ(*event, "data: " + payload);
  }
  ASSERT_TRUE(writer_->Write({.data = "[DONE]"}, absl::Seconds(1)).ok());
  writer_->Close();
  EXPECT_EQ(client_->ReadEvent(), "data: [DONE]");
  EXPECT_EQ(client_->ReadEvent(), std::nullopt);  // Terminal chunk.
  EXPECT_EQ(writer_->TryWrite({.data = "late"}).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(writer_->cancelled());

  ASSERT_TRUE(client_->Send("GET /ok HTTP/1.1\r\nHost: t\r\n\r\n"));
  auto next = client_->ReadResponse();
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->body, "ok");
}

TEST_F(SseTest, ProducerThreadStreamsManyEventsInOrder) {
  ASSERT_NO_FATAL_FAILURE(Open());
  constexpr int kEvents = 500;
  std::thread producer([&] {
    for (int i = 0; i < kEvents; ++i) {
      ASSERT_TRUE(writer_->Write({.data = std::to_string(i), .event = "n"}, absl::Seconds(5)).ok());
    }
    writer_->Close();
  });
  for (int i = 0; i < kEvents; ++i) {
    auto event = client_->ReadEvent();
    ASSERT_TRUE(event.has_value()) << i;
    ASSERT_EQ(*event, "event: n\ndata: " + std::to_string(i));
  }
  EXPECT_EQ(client_->ReadEvent(), std::nullopt);
  producer.join();
}

TEST_F(SseTest, ClientDisconnectCancelsTheWriter) {
  ASSERT_NO_FATAL_FAILURE(Open());
  absl::Notification cancelled;
  writer_->OnCancel([&] { cancelled.Notify(); });
  ASSERT_TRUE(writer_->TryWrite({.data = "first"}).ok());
  ASSERT_TRUE(client_->ReadEvent().has_value());

  client_->Close();  // No further writes are needed for the server to notice.
  ASSERT_TRUE(cancelled.WaitForNotificationWithTimeout(absl::Seconds(3)));
  EXPECT_TRUE(writer_->cancelled());
  EXPECT_EQ(writer_->TryWrite({.data = "x"}).code(), absl::StatusCode::kCancelled);
  // A callback registered after the fact runs at once.
  bool late = false;
  writer_->OnCancel([&] { late = true; });
  EXPECT_TRUE(late);
}

TEST_F(SseTest, SlowClientPushesBackOnTheProducer) {
  ServerConfig config;
  config.sse_queue_events = 4;
  ASSERT_NO_FATAL_FAILURE(Open(config));

  // The client reads nothing more: once the socket buffers fill, the bounded queue must refuse.
  const std::string big(256 << 10, 'x');
  int accepted = 0;
  absl::Status status;
  const auto give_up = Clock::now() + milliseconds(10000);
  while (Clock::now() < give_up) {
    status = writer_->Write({.data = big}, absl::Milliseconds(200));
    if (!status.ok()) break;
    ++accepted;
  }
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_EQ(writer_->TryWrite({.data = big}).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(writer_->cancelled());

  // Reading resumes the flow: what was accepted arrives, then room frees up again.
  for (int i = 0; i < accepted; ++i) {
    auto event = client_->ReadEvent();
    ASSERT_TRUE(event.has_value()) << i << " of " << accepted;
    ASSERT_EQ(event->size(), big.size() + 6);
  }
  EXPECT_EQ(writer_->Write({.data = "after"}, absl::Seconds(5)), absl::OkStatus());
  EXPECT_EQ(client_->ReadEvent(), "data: after");
}

TEST_F(SseTest, ClientThatStopsReadingIsCancelledAfterTheWriteTimeout) {
  ServerConfig config;
  config.write_timeout = absl::Milliseconds(300);
  ASSERT_NO_FATAL_FAILURE(Open(config));
  absl::Notification cancelled;
  writer_->OnCancel([&] { cancelled.Notify(); });
  // Fill the socket buffers; the client never reads, so a chunk write eventually stalls.
  const std::string big(256 << 10, 'x');
  const auto give_up = Clock::now() + milliseconds(10000);
  while (!cancelled.HasBeenNotified() && Clock::now() < give_up) {
    (void)writer_->Write({.data = big}, absl::Milliseconds(100));
  }
  EXPECT_TRUE(cancelled.HasBeenNotified());
  EXPECT_EQ(writer_->TryWrite({.data = "x"}).code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(client_->WaitForClose(milliseconds(10000)));
}

TEST_F(SseTest, ShutdownWithAnOpenStreamCancelsItAndReturns) {
  ASSERT_NO_FATAL_FAILURE(Open());
  absl::Notification cancelled;
  writer_->OnCancel([&] { cancelled.Notify(); });
  ASSERT_TRUE(writer_->TryWrite({.data = "partial"}).ok());
  ASSERT_TRUE(client_->ReadEvent().has_value());

  // A producer blocked on a full queue must be released by the shutdown too.
  std::atomic<bool> producer_done{false};
  std::thread producer([&] {
    while (writer_->Write({.data = std::string(1 << 16, 'p')}, absl::Seconds(30)).ok()) {
    }
    producer_done = true;
  });

  const auto start = Clock::now();
  server_->Shutdown(absl::Milliseconds(200));
  EXPECT_LT(Clock::now() - start, milliseconds(5000));
  EXPECT_TRUE(cancelled.HasBeenNotified());
  EXPECT_TRUE(writer_->cancelled());
  producer.join();
  EXPECT_TRUE(producer_done);
  EXPECT_TRUE(client_->WaitForClose(milliseconds(3000)));
  // The writer outlives the server safely.
  server_.reset();
  EXPECT_EQ(writer_->TryWrite({.data = "x"}).code(), absl::StatusCode::kCancelled);
}

TEST_F(SseTest, StreamThatEndsWithinTheGracePeriodCompletes) {
  ASSERT_NO_FATAL_FAILURE(Open());
  const uint16_t port = server_->port();
  std::thread producer([&] {
    // The last event goes out only once the shutdown has begun (the server refuses new
    // connections), so it is the grace period that lets it through.
    const auto deadline = Clock::now() + milliseconds(5000);
    while (RawClient::Connect(port) != nullptr && Clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(1));
    }
    EXPECT_LT(Clock::now(), deadline) << "the server never began shutting down";
    EXPECT_TRUE(writer_->TryWrite({.data = "last"}).ok());
    writer_->Close();
  });
  server_->Shutdown(absl::Seconds(5));
  producer.join();
  EXPECT_EQ(client_->ReadEvent(), "data: last");
  EXPECT_EQ(client_->ReadEvent(), std::nullopt);
  EXPECT_FALSE(writer_->cancelled());
  EXPECT_TRUE(client_->WaitForClose(milliseconds(3000)));
}

TEST(SseEdgeTest, Http10ClientGetsACloseDelimitedStream) {
  WriterBox box;
  auto server = StartStreaming(&box);
  auto client = RawClient::Connect(server->port());
  ASSERT_TRUE(client->Send("GET /stream HTTP/1.0\r\n\r\n"));
  auto head = client->ReadHead();
  ASSERT_TRUE(head.has_value());
  EXPECT_EQ(head->Header("transfer-encoding"), "");  // HTTP/1.0 has no chunked encoding.
  EXPECT_EQ(head->Header("connection"), "close");
  auto writer = box.Take();
  ASSERT_NE(writer, nullptr);
  ASSERT_TRUE(writer->TryWrite({.data = "one"}).ok());
  ASSERT_TRUE(writer->TryWrite({.data = "two"}).ok());
  writer->Close();
  EXPECT_TRUE(client->WaitForClose(milliseconds(3000)));
  EXPECT_EQ(client->buffered(), "data: one\n\ndata: two\n\n");
}

TEST(SseEdgeTest, HandlerWithoutOnOpenGetsItsConnectionClosed) {
  Router router;
  ASSERT_TRUE(router.Handle("GET", "/broken", [](const Request&) -> HandlerResult {
                     return SseResponse{};
                   }).ok());
  auto server = Server::Start(ServerConfig(), std::move(router)).value();
  auto client = RawClient::Connect(server->port());
  ASSERT_TRUE(client->Send("GET /broken HTTP/1.1\r\nHost: t\r\n\r\n"));
  EXPECT_TRUE(client->WaitForClose(milliseconds(3000)));
}

}  // namespace
}  // namespace tandem::http
