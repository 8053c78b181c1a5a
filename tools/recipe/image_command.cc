// `tandem-recipe image`: one image file -> its V4.1 preprocessed size and prompt positions, as
// deepseek-recipe's OpenCvImagePreprocessor + MultiModalData.image_token_adjustment() + 1 give
// them.
//
//   image --encoding v4.1 --detail low|high|original|auto [--max-dimension N]
//         [--low-detail-max-dimension N] [--no-webp-roundtrip] [--dump-rgb DIR] [--data-url]
//         FILE...
//
// Prints one JSON line per FILE: {"width": W, "height": H, "image_tokens": N}, or for a refused
// image {"error": {"kind": K, "message": M}} with recipe's message ("image[0]: You have uploaded
// an unsupported image. ..."); exits 1 when any image was refused. --dump-rgb writes the
// preprocessed pixels (RGB8, row-major, HWC) of the n-th FILE (from 0) to DIR/<n>.rgb. --max-dimension defaults to recipe's
// limit for a request of one image (8192). With --data-url each FILE holds a data: URL (text),
// decoded as recipe's resolver decodes one (DataUrlImageSource) before preprocessing. V4 renders
// images as text and counts none: refused.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "commands.h"
#include "nlohmann/json.hpp"
#include "tandem/image/data_url.h"
#include "tandem/image/errors.h"
#include "tandem/image/limits.h"
#include "tandem/image/preprocess.h"

namespace {

namespace img = tandem::image;

struct ImageArgs {
  std::optional<std::string> encoding;
  img::PreprocessOptions options = img::ImageLimits{}.OptionsFor(img::Detail::kHigh, 1);
  std::string dump_rgb;
  bool data_url = false;
  std::vector<std::string> files;
};

int Usage(const std::string& error) {
  std::fprintf(stderr,
               "error: %s\nusage: tandem-recipe image --encoding v4.1 --detail "
               "low|high|original|auto [--max-dimension N] [--low-detail-max-dimension N] "
               "[--no-webp-roundtrip] [--dump-rgb DIR] [--data-url] FILE...\n",
               error.c_str());
  return 2;
}

std::optional<img::Detail> ParseDetail(const std::string& v) {
  if (v == "low") return img::Detail::kLow;
  if (v == "high") return img::Detail::kHigh;
  if (v == "original") return img::Detail::kOriginal;
  if (v == "auto") return img::Detail::kAuto;
  return std::nullopt;
}

std::optional<std::string> ParseArgs(int argc, char** argv, ImageArgs* a) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::optional<std::string> {
      if (i + 1 >= argc) return std::nullopt;
      return std::string(argv[++i]);
    };
    auto pixels = [&](std::uint32_t* out) -> bool {
      const std::optional<std::string> v = value();
      return v.has_value() && absl::SimpleAtoi(*v, out) && *out > 0;
    };
    if (arg == "--encoding") {
      a->encoding = value();
    } else if (arg == "--detail") {
      const std::optional<std::string> v = value();
      const std::optional<img::Detail> d = v ? ParseDetail(*v) : std::nullopt;
      if (!d) return "--detail takes low, high, original or auto";
      a->options.detail = *d;
    } else if (arg == "--max-dimension") {
      if (!pixels(&a->options.max_dimension_px)) return "--max-dimension takes a positive integer";
    } else if (arg == "--low-detail-max-dimension") {
      if (!pixels(&a->options.low_detail_max_dimension_px)) {
        return "--low-detail-max-dimension takes a positive integer";
      }
    } else if (arg == "--data-url") {
      a->data_url = true;
    } else if (arg == "--no-webp-roundtrip") {
      a->options.webp_roundtrip = false;
    } else if (arg == "--dump-rgb") {
      const std::optional<std::string> v = value();
      if (!v) return "--dump-rgb takes a directory";
      a->dump_rgb = *v;
    } else if (!arg.empty() && arg[0] == '-') {
      return "unknown option " + arg;
    } else {
      a->files.push_back(arg);
    }
  }
  if (!a->encoding) return "--encoding is required";
  if (*a->encoding == "v4") return "V4 renders images as \"[Unsupported Image]\" text: no image tokens";
  if (*a->encoding != "v4.1") return "--encoding takes v4.1";
  if (a->files.empty()) return "no image file";
  return std::nullopt;
}

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

int RunImage(int argc, char** argv) {
  ImageArgs args;
  if (std::optional<std::string> error = ParseArgs(argc, argv, &args)) return Usage(*error);
  int status = 0;
  for (std::size_t n = 0; n < args.files.size(); ++n) {
    const std::string& path = args.files[n];
    const std::optional<std::string> bytes = ReadFile(path);
    if (!bytes) {
      std::fprintf(stderr, "error: cannot read %s\n", path.c_str());
      return 2;
    }
    absl::StatusOr<img::PreprocessedImage> image;
    if (args.data_url) {
      absl::StatusOr<std::string> decoded =
          img::DecodeDataUrl(*bytes, img::ImageLimits{}.max_image_bytes);
      image = decoded.ok() ? img::PreprocessImage(*decoded, args.options)
                           : absl::StatusOr<img::PreprocessedImage>(decoded.status());
    } else {
      image = img::PreprocessImage(*bytes, args.options);
    }
    nlohmann::json line;
    if (!image.ok()) {
      const absl::Status located = img::WithImageLocation(image.status(), "", 0);
      const std::optional<img::ImageErrorKind> kind = img::GetImageErrorKind(located);
      line["error"] = {{"kind", kind ? std::string(img::ImageErrorKindName(*kind)) : "Unknown"},
                       {"message", std::string(located.message())}};
      status = 1;
    } else {
      line = {{"width", image->width}, {"height", image->height},
              {"image_tokens", image->image_tokens}};
      if (!args.dump_rgb.empty()) {
        const std::string out_path = args.dump_rgb + "/" + std::to_string(n) + ".rgb";
        std::ofstream out(out_path, std::ios::binary);
        out.write(reinterpret_cast<const char*>(image->rgb.data()),
                  static_cast<std::streamsize>(image->rgb.size()));
        if (!out) return Usage("cannot write " + out_path);
      }
    }
    std::cout << line.dump() << "\n";
  }
  std::cout.flush();
  return status;
}
