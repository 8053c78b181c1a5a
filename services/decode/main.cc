#include "worker_app.h"

int main(int argc, char** argv) {
  return tandem::worker::RunWorkerMain(
      tandem::v1::WORKER_ROLE_DECODE, "tandem-decode",
      "Receives prompt KV from prefill workers and runs continuous-batching decode.", argc, argv);
}
