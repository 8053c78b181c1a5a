#include "worker_app.h"

int main(int argc, char** argv) {
  return tandem::worker::RunWorkerMain(
      tandem::v1::WORKER_ROLE_PREFILL, "tandem-prefill",
      "Computes prompt KV and the first token, and pushes the KV to a decode worker over UCX.",
      argc, argv);
}
