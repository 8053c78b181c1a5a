#include "worker_app.h"
#include "tandem/base/process.h"

int main(int argc, char** argv) {
  tandem::base::ConfigureServingProcess();
  return tandem::worker::RunWorkerMain(
      tandem::v1::WORKER_ROLE_DECODE, "tandem-decode",
      "Receives prompt KV from prefill workers and runs continuous-batching decode.", argc, argv);
}
