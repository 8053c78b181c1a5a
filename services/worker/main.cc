#include "worker_app.h"
#include "tandem/base/process.h"

int main(int argc, char** argv) {
  tandem::base::ConfigureServingProcess();
  return tandem::worker::RunWorkerMain(
      tandem::v1::WORKER_ROLE_COMBINED, "tandem-worker",
      "Prefill and decode in one process, for single-node deployments.", argc, argv);
}
