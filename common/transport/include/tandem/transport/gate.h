#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tandem/transport/transfer_agent.h"

namespace tandem::transport {

// What a back-end offers for one gated write: puts that complete locally (the bytes may land at
// the receiver later, and in any order) and a fence. Back-ends implement this; the gate itself is
// GateSequencer, so the out-of-order fault agent (fault_agent.h) tests the very sequencing that
// UCX runs.
class RmaOps {
 public:
  virtual ~RmaOps() = default;
  virtual absl::Status Put(const WriteSegment& segment) = 0;
  // Completes only once every put issued before it has landed at the receiver.
  virtual absl::Status Fence() = 0;
  // Reaps completions: true once every operation issued so far has completed, an error when one
  // failed.
  virtual absl::StatusOr<bool> Reap() = 0;
};

// Checks every segment against the region it names (the receiver would otherwise be written out
// of bounds by a malformed target).
absl::Status ValidateGatedWrite(const GatedWrite& write);

// The two-phase gate of a GatedWrite: data puts, a fence, and only once the fence completed the
// flag puts and a second fence (so kDone means the flags landed too).
class GateSequencer {
 public:
  enum class Phase : std::uint8_t { kData, kFlags, kDone, kFailed };

  // Issues the data phase. The write's local buffers must outlive the transfer.
  void Start(RmaOps& ops, const GatedWrite& write);
  // Moves to the next phase once the current one has completed. Call it on every poll.
  void Advance(RmaOps& ops);
  void Fail(absl::Status cause);

  Phase phase() const { return phase_; }
  const absl::Status& cause() const { return cause_; }
  std::uint64_t bytes() const { return bytes_; }
  TransferStatus status() const;

 private:
  void IssuePuts(RmaOps& ops, const std::vector<WriteSegment>& segments);
  void IssueFence(RmaOps& ops);

  Phase phase_ = Phase::kData;
  std::vector<WriteSegment> flags_;
  absl::Status cause_;
  std::uint64_t bytes_ = 0;
};

}  // namespace tandem::transport
