#include "vision/vision_common.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/weight_checks.h"
#include "tandem/base/hash.h"
#include "tandem/base/status_macros.h"

namespace tandem::model::internal {

absl::StatusOr<std::string> ReadSmallFile(const std::string& path, std::size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::string text(max_bytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is larger than ", max_bytes, " bytes"));
  }
  return text;
}

absl::StatusOr<VisionJson> ParseJsonObject(const std::string& text, const std::string& source) {
  VisionJson j = VisionJson::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not a JSON object"));
  }
  return j;
}

absl::StatusOr<int> JsonInt(const VisionJson& j, const char* key, int lo, int hi,
                            const std::string& source) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", key, " must be an integer"));
  }
  const std::int64_t v = it->get<std::int64_t>();
  if (v < lo || v > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": ", key, " = ", v, " is outside [", lo, ", ", hi, "]"));
  }
  return static_cast<int>(v);
}

absl::StatusOr<float> JsonFloat(const VisionJson& j, const char* key, float lo, float hi,
                                const std::string& source) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", key, " must be a number"));
  }
  const double v = it->get<double>();
  if (!(v >= lo && v <= hi)) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": ", key, " = ", v, " is outside [", lo, ", ", hi, "]"));
  }
  return static_cast<float>(v);
}

absl::StatusOr<std::array<float, 3>> JsonFloat3(const VisionJson& j, const char* key, float lo,
                                                float hi, const std::string& source) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_array() || it->size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": ", key, " must be an array of 3 numbers (R, G, B)"));
  }
  std::array<float, 3> out{};
  for (int c = 0; c < 3; ++c) {
    const VisionJson& e = (*it)[c];
    if (!e.is_number() || !(e.get<double>() >= lo && e.get<double>() <= hi)) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": ", key, "[", c, "] must be a number in [", lo, ", ", hi, "]"));
    }
    out[c] = static_cast<float>(e.get<double>());
  }
  return out;
}

absl::StatusOr<kernels::WeightView> WeightTaker::Matrix(absl::string_view name, std::int64_t rows,
                                                        std::int64_t cols) const {
  const std::string full = absl::StrCat(prefix_, name);
  TANDEM_ASSIGN_OR_RETURN(kernels::WeightView w, ckpt_.Get(full, check_finite_));
  if (w.dtype == kernels::DType::kF8E4M3) {
    return absl::InvalidArgumentError(absl::StrCat(full, ": FP8 vision weights are not supported"));
  }
  TANDEM_RETURN_IF_ERROR(ExpectShape(full, w, rows, cols));
  return w;
}

absl::StatusOr<kernels::WeightView> WeightTaker::PatchConv(absl::string_view name, std::int64_t out,
                                                           int patch) const {
  const std::string full = absl::StrCat(prefix_, name);
  TANDEM_ASSIGN_OR_RETURN(std::vector<std::int64_t> shape, ckpt_.Shape(full));
  if (shape != std::vector<std::int64_t>{out, 3, patch, patch}) {
    return absl::InvalidArgumentError(
        absl::StrCat(full, ": expected [", out, ", 3, ", patch, ", ", patch, "] (a patch Conv2d)"));
  }
  TANDEM_ASSIGN_OR_RETURN(kernels::WeightView w, ckpt_.Get(full, check_finite_));
  if (w.dtype == kernels::DType::kF8E4M3) {
    return absl::InvalidArgumentError(absl::StrCat(full, ": FP8 vision weights are not supported"));
  }
  w.rows = out;  // the loader flattened [out, 3, p] into rows; the GEMM wants one row per filter
  w.cols = 3LL * patch * patch;
  return w;
}

namespace {

// Word-wise: four independent 64-bit lanes of multiply-xorshift, so a multi-gigabyte checkpoint
// hashes at memory speed rather than FNV's one byte per multiplication. Not cryptographic; the
// encoder cache hashes this digest with SHA-256 together with the image bytes.
class WideHasher {
 public:
  explicit WideHasher(std::uint64_t seed) {
    for (int i = 0; i < 4; ++i) lane_[i] = seed + 0x9e3779b97f4a7c15ULL * (i + 1);
  }
  void Add(const void* data, std::size_t n) {
    const auto* p = static_cast<const std::uint8_t*>(data);
    total_ += n;
    std::size_t i = 0;
    for (; i + 32 <= n; i += 32) {
      for (int l = 0; l < 4; ++l) {
        std::uint64_t w;
        std::memcpy(&w, p + i + 8 * l, 8);
        lane_[l] = Mix(lane_[l] ^ w);
      }
    }
    if (i < n) lane_[0] = Mix(lane_[0] ^ StableHash64({p + i, n - i}, lane_[1]));
  }
  void AddString(absl::string_view s) {
    const std::uint64_t len = s.size();
    Add(&len, sizeof(len));
    Add(s.data(), s.size());
  }
  std::uint64_t Digest(std::uint64_t salt) const {
    std::uint64_t words[6] = {lane_[0], lane_[1], lane_[2], lane_[3], total_, salt};
    return StableHash64({reinterpret_cast<const std::uint8_t*>(words), sizeof(words)}, salt);
  }

 private:
  static std::uint64_t Mix(std::uint64_t z) {
    z *= 0xbf58476d1ce4e5b9ULL;
    z ^= z >> 31;
    z *= 0x94d049bb133111ebULL;
    return z ^ (z >> 29);
  }
  std::uint64_t lane_[4];
  std::uint64_t total_ = 0;
};

}  // namespace

std::string VisionFingerprint(absl::Span<const std::string> config_texts,
                              const SafetensorsCheckpoint& ckpt) {
  WideHasher h(0x7669736e);  // "visn"
  for (const std::string& t : config_texts) h.AddString(t);
  for (const auto& [name, tensor] : ckpt.tensors()) {
    h.AddString(name);
    const std::string_view dtype = kernels::DTypeName(tensor.view.dtype);
    h.AddString(absl::string_view(dtype.data(), dtype.size()));
    for (std::int64_t d : tensor.shape) h.Add(&d, sizeof(d));
    h.Add(tensor.view.data,
          static_cast<std::size_t>(tensor.view.numel()) * kernels::DTypeSize(tensor.view.dtype));
  }
  char buf[33];
  std::snprintf(buf, sizeof(buf), "%016llx%016llx", static_cast<unsigned long long>(h.Digest(1)),
                static_cast<unsigned long long>(h.Digest(2)));
  return buf;
}

absl::Status ValidateSize(int width, int height, int max_side, std::int64_t max_pixels) {
  if (width <= 0 || height <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("image size ", width, "x", height, " must be positive"));
  }
  if (width > max_side || height > max_side ||
      static_cast<std::int64_t>(width) * height > max_pixels) {
    return absl::InvalidArgumentError(absl::StrCat("image size ", width, "x", height,
                                                   " exceeds the tower's limits (", max_side,
                                                   " pixels a side, ", max_pixels, " in all)"));
  }
  return absl::OkStatus();
}

absl::Status ValidateRgb(int width, int height, absl::Span<const std::uint8_t> rgb, int max_side,
                         std::int64_t max_pixels) {
  TANDEM_RETURN_IF_ERROR(ValidateSize(width, height, max_side, max_pixels));
  const std::size_t expected = static_cast<std::size_t>(width) * height * 3;
  if (rgb.size() != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat("image buffer holds ", rgb.size(), " bytes; a ", width, "x", height,
                     " RGB8 image (3 channels, HWC) needs ", expected));
  }
  return absl::OkStatus();
}

void ExtractPatches(const std::uint8_t* rgb, int width, int height, int patch,
                    const PixelNorm& norm, float* out) {
  const int rows = height / patch, cols = width / patch;
  const std::int64_t dim = 3LL * patch * patch;
  for (int pr = 0; pr < rows; ++pr) {
    for (int pc = 0; pc < cols; ++pc) {
      float* dst = out + (static_cast<std::int64_t>(pr) * cols + pc) * dim;
      for (int c = 0; c < 3; ++c) {
        for (int y = 0; y < patch; ++y) {
          const std::uint8_t* src =
              rgb + ((static_cast<std::int64_t>(pr) * patch + y) * width + pc * patch) * 3 + c;
          // The same three roundings as torch's (v * rescale - mean) / std.
          for (int x = 0; x < patch; ++x) {
            *dst++ = (static_cast<float>(src[x * 3]) * norm.rescale - norm.mean[c]) / norm.std[c];
          }
        }
      }
    }
  }
}

}  // namespace tandem::model::internal
