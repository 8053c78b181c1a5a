#pragma once

#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "async/event.h"
#include "tandem/http/sse_writer.h"

namespace tandem::router {

// Hands a stream's writer from the I/O thread that opens it to the generation waiting to write.
// The stream may also never open (the client left first): then the slot is abandoned. Either
// wakes the waiting generation.
class WriterSlot {
 public:
  explicit WriterSlot(std::shared_ptr<async::Event> wake) : wake_(std::move(wake)) {}

  void Set(std::shared_ptr<http::SseWriter> writer);
  void Abandon();

  bool settled();
  // The writer; null while unsettled or when abandoned.
  std::shared_ptr<http::SseWriter> writer();

 private:
  const std::shared_ptr<async::Event> wake_;
  absl::Mutex mu_;
  std::shared_ptr<http::SseWriter> writer_ ABSL_GUARDED_BY(mu_);
  bool abandoned_ ABSL_GUARDED_BY(mu_) = false;
};

// Abandons its slot when destroyed, i.e. when whatever would have opened the stream is dropped.
class AbandonOnDrop {
 public:
  explicit AbandonOnDrop(std::shared_ptr<WriterSlot> slot) : slot_(std::move(slot)) {}
  ~AbandonOnDrop() { slot_->Abandon(); }
  AbandonOnDrop(const AbandonOnDrop&) = delete;
  AbandonOnDrop& operator=(const AbandonOnDrop&) = delete;

 private:
  std::shared_ptr<WriterSlot> slot_;
};

}  // namespace tandem::router
