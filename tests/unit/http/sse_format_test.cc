#include "gtest/gtest.h"
#include "tandem/http/sse_writer.h"

namespace tandem::http {
namespace {

TEST(SseFormatTest, SingleLineData) {
  EXPECT_EQ(FormatSseEvent({.data = "[DONE]"}), "data: [DONE]\n\n");
}

TEST(SseFormatTest, EveryLineBreakStartsANewDataField) {
  EXPECT_EQ(FormatSseEvent({.data = "a\nb\r\nc\rd"}), "data: a\ndata: b\ndata: c\ndata: d\n\n");
  EXPECT_EQ(FormatSseEvent({.data = "end\n"}), "data: end\ndata: \n\n");
  EXPECT_EQ(FormatSseEvent({.data = ""}), "data: \n\n");
}

TEST(SseFormatTest, EventAndIdComeFirstWithoutLineBreaks) {
  EXPECT_EQ(FormatSseEvent({.data = "x", .event = "to\nken", .id = "4\r2"}),
            "event: token\nid: 42\ndata: x\n\n");
}

}  // namespace
}  // namespace tandem::http
