#pragma once

#include "tandem/v1/common.pb.h"

namespace tandem::worker {

// The whole life of a worker process: flags, model, engine, gRPC server, router registration,
// and a graceful stop on SIGINT/SIGTERM. The three worker binaries differ only in `role`.
int RunWorkerMain(v1::WorkerRole role, const char* program, const char* summary, int argc,
                  char** argv);

}  // namespace tandem::worker
