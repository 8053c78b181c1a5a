// tandem-encoder's service throughput: images/s through EncodeImage for distinct images (each a
// tower run: preprocessing + vision tower) and for the same images again (cache hits: the content
// key, a lease), one run, ratio printed.
//
//   build/tests/perf/tandem_encoder_throughput_bench [--tower DIR] [--images 16] [--size 448]
//                                                     [--threads 0]
//
// DIR defaults to the tiny V4.1 fixture (tests/fixtures/vision/v41); a realistic tower comes from
// tools/fixtures/make_vision_fixtures.py --realistic. Images are PNGs of --size x --size, distinct
// by their pixels, at high detail.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "../unit/image/image_test_util.h"
#include "encoder_service.h"
#include "tandem/kernels/backend.h"
#include "tower_encoder.h"

namespace {

using Clock = std::chrono::steady_clock;

double ImagesPerSecond(tandem::encoder::EncoderService& service,
                       const std::vector<std::string>& images) {
  const auto start = Clock::now();
  for (const std::string& image : images) {
    grpc::ServerContext ctx;
    tandem::v1::EncodeImageRequest req;
    req.set_image(image);
    req.set_detail(tandem::v1::IMAGE_DETAIL_HIGH);
    tandem::v1::EncodeImageResponse resp;
    const grpc::Status st = service.EncodeImage(&ctx, &req, &resp);
    if (!st.ok()) {
      std::fprintf(stderr, "EncodeImage: %s\n", st.error_message().c_str());
      std::exit(1);
    }
    tandem::v1::ReleaseEmbeddingsRequest rel;
    rel.set_lease_id(resp.lease_id());
    tandem::v1::ReleaseEmbeddingsResponse rel_resp;
    grpc::ServerContext rel_ctx;
    service.ReleaseEmbeddings(&rel_ctx, &rel, &rel_resp).IgnoreError();
  }
  return images.size() / std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::string tower_dir = std::string(TANDEM_SOURCE_DIR) + "/tests/fixtures/vision/v41";
  int count = 16, size = 448, threads = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--tower") tower_dir = argv[i + 1];
    else if (flag == "--images") count = std::atoi(argv[i + 1]);
    else if (flag == "--size") size = std::atoi(argv[i + 1]);
    else if (flag == "--threads") threads = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (count <= 0 || size <= 0) return 2;
  auto backend = tandem::kernels::CreateCpuBackend({threads});
  auto tower = tandem::model::LoadVisionTower(tower_dir, backend.get());
  if (!tower.ok()) {
    std::fprintf(stderr, "%s\n", std::string(tower.status().message()).c_str());
    return 1;
  }
  tandem::encoder::TowerEncoder encoder(std::move(*tower), tandem::image::ImageLimits{});
  tandem::encoder::EmbeddingCache cache({});
  tandem::encoder::EncoderService service(&encoder, &cache, {});
  std::vector<std::string> images;
  for (int i = 0; i < count; ++i) {
    images.push_back(tandem::image::testing::Png(
        static_cast<std::uint32_t>(size), static_cast<std::uint32_t>(size), 2, 8,
        [i](int x, int y, int c) { return (x * 37 + y * 11 + c * 80 + i * 53) % 256; }));
  }
  const double misses = ImagesPerSecond(service, images);
  const double hits = ImagesPerSecond(service, images);
  const auto stats = cache.stats();
  std::printf("%s, %d images of %dx%d: %.2f images/s encoding (%llu tower runs), %.0f images/s "
              "from the cache; hit/miss ratio %.0f\n",
              std::string(encoder.tower().kind()).c_str(), count, size, size, misses,
              static_cast<unsigned long long>(stats.computes), hits, hits / misses);
  return 0;
}
