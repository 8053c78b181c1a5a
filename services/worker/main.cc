#include "worker_app.h"

int main(int argc, char** argv) {
  return tandem::worker::RunWorkerMain(
      tandem::v1::WORKER_ROLE_COMBINED, "tandem-worker",
      "Prefill and decode in one process, for single-node deployments.", argc, argv);
}
