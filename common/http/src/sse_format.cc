#include "absl/strings/str_cat.h"
#include "tandem/http/sse_writer.h"

namespace tandem::http {
namespace {

std::string WithoutLineBreaks(absl::string_view value) {
  std::string out;
  for (char c : value) {
    if (c != '\r' && c != '\n') out += c;
  }
  return out;
}

}  // namespace

std::string FormatSseEvent(const SseEvent& event) {
  std::string out;
  if (!event.event.empty()) absl::StrAppend(&out, "event: ", WithoutLineBreaks(event.event), "\n");
  if (!event.id.empty()) absl::StrAppend(&out, "id: ", WithoutLineBreaks(event.id), "\n");
  // The SSE grammar ends a line at CRLF, LF or CR; each line of data gets its own field.
  absl::string_view data = event.data;
  size_t start = 0;
  for (size_t i = 0; i <= data.size(); ++i) {
    if (i < data.size() && data[i] != '\n' && data[i] != '\r') continue;
    absl::StrAppend(&out, "data: ", data.substr(start, i - start), "\n");
    if (i + 1 < data.size() && data[i] == '\r' && data[i + 1] == '\n') ++i;
    start = i + 1;
  }
  out += '\n';
  return out;
}

}  // namespace tandem::http
