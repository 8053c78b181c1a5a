#pragma once

namespace tandem::base {

// Called first in every service's main. Abseil as Debian builds it (without NDEBUG) checks every
// absl::Mutex acquisition against a process-wide lock graph for potential deadlocks; gRPC's
// internal mutexes are absl::Mutex too, so on a serving path that detector costs a global lock
// per acquisition. Release builds of tandem switch it off; debug builds keep it.
void ConfigureServingProcess();

}  // namespace tandem::base
