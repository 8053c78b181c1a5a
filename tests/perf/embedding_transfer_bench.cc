// Image rows from encoder to prefill (chunked gRPC, what a prefill worker runs) against the KV
// handoff's transport (a UCX gated write between two agents, what a prefill runs to a decode),
// same bytes, same machine, one run. Prints MB/s of each and the ratio.
//
//   build/tests/perf/tandem_embedding_transfer_bench [--rows 1024] [--hidden 4096] [--rounds 20]
//                                                    [--tls tcp]
//
// Embedding side: an in-process EncoderService (a fake tower that returns rows x hidden floats
// at once, so only the transfer is timed) on 127.0.0.1 and the worker's ImageRowsFetcher pulling the
// rows under a fresh lease each round. KV side: the same number of bytes as 64 blocks written by
// a gated write, the receiver progressing on its own thread.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "encoder_service.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "image_rows_fetcher.h"
#include "gated_write_throughput.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int rows = 1024;
  int hidden = 4096;
  int rounds = 20;
  std::string tls = "tcp";
};

class InstantTower : public tandem::encoder::ImageEncoder {
 public:
  InstantTower(int rows, int hidden) : rows_(rows), hidden_(hidden) {}
  const tandem::encoder::EncodingIdentity& identity() const override { return identity_; }
  absl::StatusOr<tandem::encoder::Embedding> Encode(absl::string_view,
                                                    tandem::v1::ImageDetailLevel) override {
    tandem::encoder::Embedding e;
    e.rows = rows_;
    e.hidden = hidden_;
    e.data.assign(static_cast<std::size_t>(rows_) * hidden_, 0.5f);
    return e;
  }

 private:
  int rows_, hidden_;
  tandem::encoder::EncodingIdentity identity_{"bench", "bench"};
};

double EmbeddingMbPerSec(const Options& o) {
  InstantTower tower(o.rows, o.hidden);
  tandem::encoder::EmbeddingCache cache({});
  tandem::encoder::EncoderService service(&tower, &cache, {});
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  auto server = builder.BuildAndStart();
  tandem::worker::ImageRowsFetcher fetcher(o.hidden, {});
  std::string key;
  auto round = [&] {
    grpc::ServerContext ctx;
    tandem::v1::EncodeImageRequest req;
    if (key.empty()) req.set_image("bench-image"); else req.set_content_key(key);
    tandem::v1::EncodeImageResponse resp;
    if (!service.EncodeImage(&ctx, &req, &resp).ok()) std::exit(1);
    key = resp.content_key();
    google::protobuf::RepeatedPtrField<tandem::v1::PromptImage> images;
    tandem::v1::PromptImage* image = images.Add();
    image->set_rows(resp.rows());
    image->set_encoder_endpoint("127.0.0.1:" + std::to_string(port));
    image->set_lease_id(resp.lease_id());
    auto got = fetcher.Resolve(images, true, std::chrono::system_clock::now() + std::chrono::seconds(60));
    if (!got.ok()) {
      std::fprintf(stderr, "fetch failed: %s\n", std::string(got.status().message()).c_str());
      std::exit(1);
    }
  };
  round();  // channel set-up out of the timing
  const auto start = Clock::now();
  for (int r = 0; r < o.rounds; ++r) round();
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  server->Shutdown();
  return static_cast<double>(o.rows) * o.hidden * sizeof(float) * o.rounds / secs / 1e6;
}

double KvMbPerSec(const Options& o) {
  // The same bytes as 64 blocks, as a prompt's KV travels.
  constexpr int kBlocks = 64;
  const std::size_t total = static_cast<std::size_t>(o.rows) * o.hidden * sizeof(float);
  return tandem::bench::GatedWriteMbPerSec(o.tls, kBlocks, (total + kBlocks - 1) / kBlocks,
                                           o.rounds);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--rows") o.rows = std::atoi(argv[i + 1]);
    else if (flag == "--hidden") o.hidden = std::atoi(argv[i + 1]);
    else if (flag == "--rounds") o.rounds = std::atoi(argv[i + 1]);
    else if (flag == "--tls") o.tls = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (o.rows <= 0 || o.hidden <= 0 || o.rounds <= 0) return 2;
  const double mb = static_cast<double>(o.rows) * o.hidden * sizeof(float) / 1e6;
  const double embedding = EmbeddingMbPerSec(o);
  const double kv = KvMbPerSec(o);
  std::printf("%d rows x %d floats (%.1f MB) x %d rounds: embedding rows (gRPC) %.0f MB/s, "
              "KV handoff (UCX %s) %.0f MB/s, ratio %.2f\n",
              o.rows, o.hidden, mb, o.rounds, embedding, o.tls.c_str(), kv, embedding / kv);
  return 0;
}
