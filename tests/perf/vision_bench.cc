// Encode time of a vision tower on the fast CPU backend: load time, then one warm-up and
// `repeats` timed Encode calls per size (best and mean), with the tower's output rows.
//
//   build-x/tests/perf/tandem_vision_bench TOWER_DIR [threads=2] [repeats=3] WxH [WxH ...]
//
// Sizes are the tower's input (after preprocessing): for the V4.1 tower, multiples of 14 as
// deepseek_recipe produces them; for DeepSeek-VL, its image_size square. The image is
// make_vision_fixtures.py's pattern_image (seed 0). With TANDEM_VISION_DUMP=PREFIX set, each size's
// rows are written to PREFIX_WxH.f32 (little-endian float32) for tests/perf/vision_torch_bench.py.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tandem/kernels/backend.h"
#include "tandem/model/vision.h"

namespace {

double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s TOWER_DIR threads repeats WxH [WxH ...]\n", argv[0]);
    return 2;
  }
  const int threads = std::atoi(argv[2]), repeats = std::max(1, std::atoi(argv[3]));
  auto backend = tandem::kernels::CreateCpuBackend({.num_threads = threads});
  const auto t0 = std::chrono::steady_clock::now();
  auto tower = tandem::model::LoadVisionTower(argv[1], backend.get());
  const auto t1 = std::chrono::steady_clock::now();
  if (!tower.ok()) {
    std::fprintf(stderr, "load: %s\n", std::string(tower.status().message()).c_str());
    return 1;
  }
  std::printf("tower %s  hidden %d  load+fingerprint %.2f s  threads %d\n",
              std::string((*tower)->kind()).c_str(), (*tower)->hidden_size(), Seconds(t0, t1),
              threads);
  for (int a = 4; a < argc; ++a) {
    int w = 0, h = 0;
    if (std::sscanf(argv[a], "%dx%d", &w, &h) != 2) {
      std::fprintf(stderr, "bad size %s\n", argv[a]);
      return 2;
    }
    std::vector<std::uint8_t> rgb(static_cast<std::size_t>(w) * h * 3);
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) {
        for (int c = 0; c < 3; ++c) {
          rgb[(static_cast<std::size_t>(y) * w + x) * 3 + c] = static_cast<std::uint8_t>(
              (x * 7LL + y * 13LL + c * 101LL + (static_cast<std::int64_t>(x) * y) % 31) % 256);
        }
      }
    }
    std::vector<float> last;
    auto rows = (*tower)->OutputRows(w, h);
    if (!rows.ok()) {
      std::fprintf(stderr, "%s: %s\n", argv[a], std::string(rows.status().message()).c_str());
      return 1;
    }
    std::vector<double> times;
    for (int r = 0; r <= repeats; ++r) {  // r == 0: warm-up
      const auto s = std::chrono::steady_clock::now();
      auto out = (*tower)->Encode(w, h, rgb);
      const auto e = std::chrono::steady_clock::now();
      if (!out.ok()) {
        std::fprintf(stderr, "encode: %s\n", std::string(out.status().message()).c_str());
        return 1;
      }
      if (r > 0) times.push_back(Seconds(s, e));
      last = *std::move(out);
    }
    if (const char* prefix = std::getenv("TANDEM_VISION_DUMP"); prefix != nullptr) {
      const std::string path = std::string(prefix) + "_" + argv[a] + ".f32";
      if (std::FILE* f = std::fopen(path.c_str(), "wb")) {
        std::fwrite(last.data(), sizeof(float), last.size(), f);
        std::fclose(f);
      }
    }
    double mean = 0;
    for (double t : times) mean += t;
    mean /= static_cast<double>(times.size());
    std::printf("%5dx%-5d rows %5d  best %9.3f ms  mean %9.3f ms  (%d runs)\n", w, h, *rows,
                1e3 * *std::min_element(times.begin(), times.end()), 1e3 * mean, repeats);
  }
  return 0;
}
