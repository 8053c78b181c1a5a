#include "tandem/transport/gate.h"

#include "absl/strings/str_cat.h"

namespace tandem::transport {

absl::Status ValidateGatedWrite(const GatedWrite& write) {
  for (const auto* segments : {&write.data, &write.flags}) {
    for (const WriteSegment& s : *segments) {
      if (s.region < 0 || s.region >= static_cast<int>(write.regions.size())) {
        return absl::InvalidArgumentError(
            absl::StrCat("segment names region ", s.region, " of ", write.regions.size()));
      }
      const RegionDescriptor& r = write.regions[s.region];
      if (s.remote_addr < r.base || s.remote_addr + s.bytes > r.base + r.length) {
        return absl::OutOfRangeError("segment falls outside the receiver's registered region");
      }
    }
  }
  return absl::OkStatus();
}

void GateSequencer::Start(RmaOps& ops, const GatedWrite& write) {
  flags_ = write.flags;
  IssuePuts(ops, write.data);
  // The gate: this fence completes only once every data put has landed at the receiver, and
  // Advance issues the flags only after it completed. Puts alone complete locally, which on a
  // transport with several lanes (or a delaying one) says nothing about arrival order.
  IssueFence(ops);
}

void GateSequencer::Advance(RmaOps& ops) {
  if (phase_ == Phase::kDone) return;
  absl::StatusOr<bool> quiet = ops.Reap();
  if (!quiet.ok()) Fail(quiet.status());
  if (phase_ == Phase::kFailed || !*quiet) return;
  if (phase_ == Phase::kData) {
    phase_ = Phase::kFlags;
    IssuePuts(ops, flags_);
    IssueFence(ops);
    return;
  }
  phase_ = Phase::kDone;
}

void GateSequencer::Fail(absl::Status cause) {
  if (phase_ == Phase::kFailed) return;
  phase_ = Phase::kFailed;
  cause_ = std::move(cause);
}

TransferStatus GateSequencer::status() const {
  switch (phase_) {
    case Phase::kDone:
      return {TransferState::kDone, absl::OkStatus(), bytes_};
    case Phase::kFailed:
      return {TransferState::kFailed, cause_, bytes_};
    default:
      return {TransferState::kInProgress, absl::OkStatus(), bytes_};
  }
}

void GateSequencer::IssuePuts(RmaOps& ops, const std::vector<WriteSegment>& segments) {
  for (const WriteSegment& s : segments) {
    if (phase_ == Phase::kFailed) return;
    absl::Status st = ops.Put(s);
    if (!st.ok()) {
      Fail(std::move(st));
      return;
    }
    bytes_ += s.bytes;
  }
}

void GateSequencer::IssueFence(RmaOps& ops) {
  if (phase_ == Phase::kFailed) return;
  absl::Status st = ops.Fence();
  if (!st.ok()) Fail(std::move(st));
}

}  // namespace tandem::transport
