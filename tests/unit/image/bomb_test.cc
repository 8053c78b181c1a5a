// Decompression bombs and lying headers: refused from the header in well under 50 ms, and without
// allocating the declared size (checked in a child process whose address space is capped far
// below it, where any such allocation fails).
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "image_test_util.h"
#include "tandem/image/limits.h"
#include "tandem/image/preprocess.h"

namespace tandem::image {
namespace {

using testing::AppendBe32;
using testing::ExpectImageError;

struct Bomb {
  const char* name;
  std::string bytes;
};

std::string TinyIdat() {
  std::string zeros(1000, '\0');
  uLongf size = compressBound(zeros.size());
  std::string out(size, '\0');
  compress(reinterpret_cast<Bytef*>(out.data()), &size, reinterpret_cast<const Bytef*>(zeros.data()),
           zeros.size());
  out.resize(size);
  return out;
}

std::string JpegDeclaring(int w, int h) {
  std::string jpeg = testing::Jpeg(8, 8);
  // SOF0 holds height then width after its length and precision bytes.
  const std::size_t sof = jpeg.find("\xff\xc0");
  jpeg[sof + 5] = static_cast<char>(h >> 8);
  jpeg[sof + 6] = static_cast<char>(h & 0xff);
  jpeg[sof + 7] = static_cast<char>(w >> 8);
  jpeg[sof + 8] = static_cast<char>(w & 0xff);
  return jpeg;
}

std::string GifDeclaring(int w, int h) {
  std::string gif = testing::Gif(4, 4);
  gif[6] = static_cast<char>(w & 0xff);
  gif[7] = static_cast<char>(w >> 8);
  gif[8] = static_cast<char>(h & 0xff);
  gif[9] = static_cast<char>(h >> 8);
  return gif;
}

std::string WebpVp8xDeclaring(std::uint32_t w, std::uint32_t h) {
  std::string chunk = "VP8X";
  chunk += std::string("\x0a\0\0\0", 4);
  chunk += std::string(4, '\0');
  for (std::uint32_t v : {w - 1, h - 1}) {
    chunk.push_back(static_cast<char>(v & 0xff));
    chunk.push_back(static_cast<char>((v >> 8) & 0xff));
    chunk.push_back(static_cast<char>((v >> 16) & 0xff));
  }
  std::string riff = "RIFF";
  const std::uint32_t size = static_cast<std::uint32_t>(4 + chunk.size());
  for (int i = 0; i < 4; ++i) riff.push_back(static_cast<char>((size >> (8 * i)) & 0xff));
  return riff + "WEBP" + chunk;
}

std::vector<Bomb> Bombs() {
  const std::string idat = TinyIdat();
  return {
      {"png 100000x100000", testing::Png(100000, 100000, 2, 8, testing::Pattern, &idat)},
      {"png 65535x65535 16-bit RGBA", testing::Png(65535, 65535, 6, 16, testing::Pattern, &idat)},
      {"jpeg 65535x65535", JpegDeclaring(65535, 65535)},
      {"gif 65535x65535", GifDeclaring(65535, 65535)},
      {"webp 16384x16384", WebpVp8xDeclaring(16384, 16384)},
  };
}

TEST(Bombs, PngUnderOneKibDeclaringTenGigapixelsIsRefusedQuickly) {
  const std::string idat = TinyIdat();
  const std::string bomb = testing::Png(100000, 100000, 2, 8, testing::Pattern, &idat);
  ASSERT_LT(bomb.size(), 1024u);
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<PreprocessedImage> r = PreprocessImage(bomb, ImageLimits{}.OptionsFor(Detail::kHigh, 1));
  const auto elapsed = std::chrono::steady_clock::now() - start;
  ExpectImageError(r.status(), ImageErrorKind::kImageDimensionsTooLarge);
  EXPECT_EQ(r.status().message(), kUnsupportedImageMessage);
  EXPECT_LT(elapsed, std::chrono::milliseconds(50));
}

TEST(Bombs, EveryFormatIsRefusedFromItsHeaderQuickly) {
  for (const Bomb& b : Bombs()) {
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<PreprocessedImage> r = PreprocessImage(b.bytes, ImageLimits{}.OptionsFor(Detail::kHigh, 1));
    const auto elapsed = std::chrono::steady_clock::now() - start;
    ExpectImageError(r.status(), ImageErrorKind::kImageDimensionsTooLarge);
    EXPECT_LT(elapsed, std::chrono::milliseconds(50)) << b.name;
  }
}

// Runs `body` in a child whose address space may grow by only `headroom` bytes; true when the
// child exited 0.
template <typename Body>
bool RunCapped(std::size_t headroom, Body body) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    long pages = 0;
    if (FILE* f = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(f, "%ld", &pages) != 1) pages = 0;
      std::fclose(f);
    }
    const rlim_t current = static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE));
    rlimit limit{current + headroom, current + headroom};
    if (pages == 0 || setrlimit(RLIMIT_AS, &limit) != 0) _exit(3);
    // Whatever happens in the child ends it here: an exception must not unwind into gtest.
    try {
      _exit(body() ? 0 : 1);
    } catch (...) {
      _exit(2);
    }
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

TEST(Bombs, NoDeclaredSizeIsEverAllocated) {
  // 256 MiB of headroom: far below any bomb's declared pixels (>= 1 GiB), far above what refusing
  // one needs.
  for (const Bomb& b : Bombs()) {
    const bool refused_cleanly = RunCapped(256u << 20, [&] {
      PreprocessOptions options = ImageLimits{}.OptionsFor(Detail::kHigh, 1);
      absl::StatusOr<PreprocessedImage> r = PreprocessImage(b.bytes, options);
      return !r.ok() && GetImageErrorKind(r.status()) == ImageErrorKind::kImageDimensionsTooLarge;
    });
    EXPECT_TRUE(refused_cleanly) << b.name;
  }
}

TEST(Bombs, TheCapWouldCatchAnAllocationOfTheDeclaredSize) {
  // The harness itself: the same child allocating a bomb's pixels must fail.
  const bool allocated = RunCapped(256u << 20, [] {
    try {
      std::vector<std::uint8_t> pixels(std::size_t{30000} * 30000 * 3);
      pixels[pixels.size() - 1] = 1;
      return true;
    } catch (const std::bad_alloc&) {
      return false;
    }
  });
  EXPECT_FALSE(allocated);
}

TEST(Bombs, LyingHeaderWithinLimitsCostsMemoryInProportionToTheData) {
  // 8000x8000 declared (within the 8192 limit; 192 MB of RGB), a few bytes of data: refused, like
  // recipe, but PNG and baseline JPEG rows are only allocated as they decode, so 32 MiB suffice.
  const std::string idat = TinyIdat();
  std::string jpeg = JpegDeclaring(8000, 8000);
  jpeg.resize(jpeg.size() - 40);  // the scan data ends early
  const std::vector<Bomb> liars = {
      {"png 8000x8000", testing::Png(8000, 8000, 2, 8, testing::Pattern, &idat)},
      {"png 8000x8000 16-bit RGBA", testing::Png(8000, 8000, 6, 16, testing::Pattern, &idat)},
      {"jpeg 8000x8000 baseline", jpeg},
  };
  for (const Bomb& b : liars) {
    const bool refused = RunCapped(32u << 20, [&] {
      absl::StatusOr<PreprocessedImage> r =
          PreprocessImage(b.bytes, ImageLimits{}.OptionsFor(Detail::kHigh, 1));
      return !r.ok() && r.status().message() == kUnsupportedImageMessage;
    });
    EXPECT_TRUE(refused) << b.name;
  }
}

}  // namespace
}  // namespace tandem::image
