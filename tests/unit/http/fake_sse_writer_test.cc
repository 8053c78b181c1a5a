#include "tandem/http/testing/fake_sse_writer.h"

#include "gtest/gtest.h"

namespace tandem::http::testing {
namespace {

TEST(FakeSseWriterTest, RecordsEventsUntilClosed) {
  FakeSseWriter writer;
  ASSERT_TRUE(writer.TryWrite({.data = "a"}).ok());
  ASSERT_TRUE(writer.Write({.data = "b", .event = "e"}, absl::Seconds(1)).ok());
  writer.Close();
  EXPECT_TRUE(writer.closed());
  EXPECT_EQ(writer.TryWrite({.data = "c"}).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_EQ(writer.events().size(), 2u);
  EXPECT_EQ(writer.events()[1].event, "e");
  writer.Disconnect();  // After a normal close there is nothing to cancel.
  EXPECT_FALSE(writer.cancelled());
}

TEST(FakeSseWriterTest, CapacityPushesBackUntilDelivered) {
  FakeSseWriter writer(/*capacity=*/1);
  ASSERT_TRUE(writer.TryWrite({.data = "a"}).ok());
  EXPECT_EQ(writer.TryWrite({.data = "b"}).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(writer.Write({.data = "b"}, absl::Seconds(1)).code(),
            absl::StatusCode::kDeadlineExceeded);
  writer.Deliver();
  EXPECT_TRUE(writer.TryWrite({.data = "b"}).ok());
}

TEST(FakeSseWriterTest, DisconnectRunsCallbacksOnce) {
  FakeSseWriter writer;
  int fired = 0;
  writer.OnCancel([&] { ++fired; });
  writer.Disconnect();
  writer.Disconnect();
  EXPECT_EQ(fired, 1);
  EXPECT_TRUE(writer.cancelled());
  EXPECT_EQ(writer.TryWrite({.data = "x"}).code(), absl::StatusCode::kCancelled);
  writer.OnCancel([&] { ++fired; });
  EXPECT_EQ(fired, 2);
}

}  // namespace
}  // namespace tandem::http::testing
