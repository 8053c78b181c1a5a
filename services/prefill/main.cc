#include "worker_app.h"
#include "tandem/base/process.h"

int main(int argc, char** argv) {
  tandem::base::ConfigureServingProcess();
  return tandem::worker::RunWorkerMain(
      tandem::v1::WORKER_ROLE_PREFILL, "tandem-prefill",
      "Computes prompt KV and the first token, and pushes the KV to a decode worker over UCX.",
      argc, argv);
}
