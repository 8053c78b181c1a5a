// Image preprocessing throughput: PreprocessImage (decode, blend, fit, pad, WebP round trip) on
// the files given, one thread, best of REPS passes after a warm-up pass. Prints one JSON line
// {"images": N, "seconds": S, "images_per_s": R}. tests/perf/image_preprocess_bench.py runs it
// beside deepseek-recipe on the same images.
//
//   tandem_image_preprocess_bench --detail high|low [--reps 3] [--max-dimension 2048] FILE...
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tandem/image/limits.h"
#include "tandem/image/preprocess.h"

int main(int argc, char** argv) {
  namespace img = tandem::image;
  img::PreprocessOptions options = img::ImageLimits{}.OptionsFor(img::Detail::kHigh, 1);
  int reps = 3;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--detail" && i + 1 < argc) {
      options.detail = std::strcmp(argv[++i], "low") == 0 ? img::Detail::kLow : img::Detail::kHigh;
    } else if (arg == "--reps" && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else if (arg == "--max-dimension" && i + 1 < argc) {
      options.max_dimension_px = static_cast<std::uint32_t>(std::atoi(argv[++i]));
    } else {
      files.push_back(arg);
    }
  }
  std::vector<std::string> images;
  for (const std::string& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    images.push_back(s.str());
  }
  double best = 1e30;
  long checksum = 0;
  for (int pass = 0; pass <= reps; ++pass) {
    checksum = 0;  // total image tokens of one pass
    const auto start = std::chrono::steady_clock::now();
    for (const std::string& bytes : images) {
      absl::StatusOr<img::PreprocessedImage> r = img::PreprocessImage(bytes, options);
      checksum += r.ok() ? r->image_tokens : -1;
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (pass > 0 && s < best) best = s;  // pass 0 warms the caches
  }
  std::printf("{\"images\": %zu, \"seconds\": %.4f, \"images_per_s\": %.2f, \"checksum\": %ld}\n",
              images.size(), best, static_cast<double>(images.size()) / best, checksum);
  return 0;
}
