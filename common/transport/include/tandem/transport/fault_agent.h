#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "tandem/transport/transfer_agent.h"

namespace tandem::transport {

// For tests only (library tandem_transport_fault): a TransferAgent whose network is an in-process
// object that delivers puts late and out of order, as a transport with several lanes may. Loopback
// TCP delivers in issue order, so a gated write that skips its fence still looks right there; over
// this one it lands its flags before its data.
struct FaultOptions {
  enum class Landing : std::uint8_t {
    kInOrder,      // issue order (what loopback TCP does)
    kNewestFirst,  // the latest pending put first: every later write overtakes earlier ones
    kShuffled,     // a random pending put, drawn from `seed`
  };
  Landing landing = Landing::kNewestFirst;
  // Pending puts addressed to this agent that land per Progress() call. Puts land only while
  // the receiver progresses (as with UCX's active-message emulation of RMA over TCP).
  int puts_per_progress = 1;
  std::uint64_t seed = 1;
};

// One put as it lands in the receiver's memory.
struct Landing {
  std::uint64_t remote_addr = 0;
  std::size_t bytes = 0;
};

// The wire between fault agents of one test; agents on it reach each other by local_address().
class FaultNetwork;
std::shared_ptr<FaultNetwork> CreateFaultNetwork();

class FaultAgent : public TransferAgent {
 public:
  static std::unique_ptr<FaultAgent> Create(std::shared_ptr<FaultNetwork> network,
                                            FaultOptions options = {});

  // Called right after each put lands in this agent's memory, on the thread that progressed it,
  // with the network locked: it may read memory but must not call into any fault agent.
  virtual void SetLandingObserver(std::function<void(const Landing&)> observer) = 0;
  // While set, puts addressed to this agent are lost and the transfers that issued them fail (a
  // broken link), instead of landing.
  virtual void SetDropPuts(bool drop) = 0;
  // Puts addressed to this agent that have not landed yet.
  virtual std::size_t pending_puts() const = 0;
};

}  // namespace tandem::transport
