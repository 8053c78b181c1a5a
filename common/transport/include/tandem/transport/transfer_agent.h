#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tandem::transport {

// A block of memory this process exposes to peers for one-sided writes. Its descriptor travels to
// the writer over the control plane (gRPC); the bytes never do.
struct RegionDescriptor {
  std::uint64_t base = 0;
  std::uint64_t length = 0;
  std::string remote_key;  // transport-specific packed key (UCX: a packed rkey)
};

class MemoryRegistration {
 public:
  virtual ~MemoryRegistration() = default;
  virtual const RegionDescriptor& descriptor() const = 0;
};

// One contiguous write: `bytes` from local memory to `remote_addr` inside regions[region].
struct WriteSegment {
  const void* local = nullptr;
  std::size_t bytes = 0;
  int region = 0;
  std::uint64_t remote_addr = 0;
};

// The two-phase gate of a KV handoff: every data segment is written and remotely complete before
// any flag segment is issued, so a receiver that observes a flag can read its block. Flags are
// small (8-byte) writes the receiver polls.
struct GatedWrite {
  std::string peer_address;                // the receiver's transport address
  std::vector<RegionDescriptor> regions;   // receiver's registrations the segments point into
  std::vector<WriteSegment> data;
  std::vector<WriteSegment> flags;
};

enum class TransferState : std::uint8_t { kInProgress, kDone, kFailed };

struct TransferStatus {
  TransferState state = TransferState::kInProgress;
  absl::Status cause;  // why it failed (peer unreachable, peer died, remote key invalid, ...)
  std::uint64_t bytes = 0;
};

using TransferId = std::uint64_t;

// Transport back-ends (UCX today; NIXL/Mooncake/verbs later) sit behind this one interface.
// Thread-safe. Progress is driven by Poll (and by any call), so no hidden threads.
class TransferAgent {
 public:
  virtual ~TransferAgent() = default;
  virtual std::string_view backend_name() const = 0;
  // Opaque address a peer needs to connect to this agent.
  virtual std::string local_address() const = 0;
  virtual absl::StatusOr<std::unique_ptr<MemoryRegistration>> RegisterMemory(void* base,
                                                                             std::size_t bytes) = 0;
  // Starts a gated write; the local buffers must stay valid until the transfer leaves kInProgress.
  virtual absl::StatusOr<TransferId> StartGatedWrite(const GatedWrite& write) = 0;
  virtual TransferStatus Poll(TransferId id) = 0;
  // Forgets a finished transfer, or abandons an in-flight one (its buffers stay needed until the
  // transport has let go of them, which Release waits for, bounded by the endpoint's failure).
  virtual void Release(TransferId id) = 0;
  // Drives the transport without a transfer of our own. A receiver must call it regularly: on
  // transports that emulate RMA with active messages (TCP) remote writes land only while the
  // target progresses.
  virtual void Progress() = 0;
  // Blocks until the transport may have something for Progress (an incoming write, a completion)
  // or `max_wait` passed, so that a receiver's progress loop sleeps while nothing arrives instead
  // of waking on a fixed short interval. Without wakeup support it sleeps `max_wait`.
  virtual void WaitForActivity(std::chrono::microseconds max_wait) {
    std::this_thread::sleep_for(max_wait);
  }
  // Drops the cached connection to a peer (after it died), so the next write reconnects.
  virtual void Disconnect(const std::string& peer_address) = 0;
};

}  // namespace tandem::transport
