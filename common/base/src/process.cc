#include "tandem/base/process.h"

#include "absl/synchronization/mutex.h"

namespace tandem::base {

void ConfigureServingProcess() {
#ifdef NDEBUG
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
#endif
}

}  // namespace tandem::base
