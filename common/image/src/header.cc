// Format sniffing and header-only size reading: everything here looks at a few bytes and never
// allocates in proportion to the declared size.
#include <cstdint>

#include "tandem/image/errors.h"
#include "tandem/image/preprocess.h"

namespace tandem::image {
namespace {

std::uint32_t Be16(const unsigned char* p) { return (p[0] << 8) | p[1]; }
std::uint32_t Be32(const unsigned char* p) {
  return (std::uint32_t{p[0]} << 24) | (p[1] << 16) | (p[2] << 8) | p[3];
}
std::uint32_t Le16(const unsigned char* p) { return p[0] | (p[1] << 8); }
std::uint32_t Le24(const unsigned char* p) { return p[0] | (p[1] << 8) | (p[2] << 16); }
std::uint32_t Le32(const unsigned char* p) { return Le24(p) | (std::uint32_t{p[3]} << 24); }

absl::Status Malformed() { return ImageError(ImageErrorKind::kDecode); }

absl::StatusOr<ImageHeader> PngHeader(const unsigned char* p, std::size_t n) {
  // Signature, then IHDR first: length 13, type, width, height.
  static constexpr unsigned char kSig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (n < 33) return Malformed();
  for (int i = 0; i < 8; ++i) {
    if (p[i] != kSig[i]) return Malformed();
  }
  if (Be32(p + 8) != 13 || p[12] != 'I' || p[13] != 'H' || p[14] != 'D' || p[15] != 'R') {
    return Malformed();
  }
  ImageHeader h{ImageFormat::kPng, Be32(p + 16), Be32(p + 20)};
  if (h.width == 0 || h.height == 0 || h.width > 0x7fffffffu || h.height > 0x7fffffffu) {
    return Malformed();
  }
  return h;
}

bool IsJpegSof(unsigned char m) {
  return m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc;
}

absl::StatusOr<ImageHeader> JpegHeader(const unsigned char* p, std::size_t n) {
  std::size_t i = 2;  // after SOI
  while (i < n) {
    if (p[i] != 0xff) return Malformed();
    while (i < n && p[i] == 0xff) ++i;  // fill bytes
    if (i >= n) break;
    const unsigned char marker = p[i++];
    if (marker == 0x01 || (marker >= 0xd0 && marker <= 0xd7)) continue;  // no length
    if (marker == 0xd8 || marker == 0xd9 || marker == 0xda) return Malformed();  // no SOF first
    if (i + 2 > n) break;
    const std::uint32_t len = Be16(p + i);
    if (len < 2) return Malformed();
    if (IsJpegSof(marker)) {
      if (len < 8 || i + 7 > n) break;
      ImageHeader h{ImageFormat::kJpeg, Be16(p + i + 5), Be16(p + i + 3)};
      if (h.width == 0 || h.height == 0) return Malformed();
      return h;
    }
    i += len;
  }
  return Malformed();
}

absl::StatusOr<ImageHeader> GifHeader(const unsigned char* p, std::size_t n) {
  if (n < 13 || p[3] != '8' || (p[4] != '7' && p[4] != '9') || p[5] != 'a') return Malformed();
  return ImageHeader{ImageFormat::kGif, Le16(p + 6), Le16(p + 8)};
}

absl::StatusOr<ImageHeader> WebpHeader(const unsigned char* p, std::size_t n) {
  if (n < 30 || p[0] != 'R' || p[1] != 'I' || p[2] != 'F' || p[3] != 'F') return Malformed();
  const unsigned char* c = p + 12;  // first chunk
  const std::uint32_t size = Le32(c + 4);
  const unsigned char* d = c + 8;
  if (c[0] == 'V' && c[1] == 'P' && c[2] == '8' && c[3] == ' ') {
    if (size < 10 || d[3] != 0x9d || d[4] != 0x01 || d[5] != 0x2a) return Malformed();
    return ImageHeader{ImageFormat::kWebp, Le16(d + 6) & 0x3fff, Le16(d + 8) & 0x3fff};
  }
  if (c[0] == 'V' && c[1] == 'P' && c[2] == '8' && c[3] == 'L') {
    if (size < 5 || d[0] != 0x2f) return Malformed();
    const std::uint32_t bits = Le32(d + 1);
    return ImageHeader{ImageFormat::kWebp, (bits & 0x3fff) + 1, ((bits >> 14) & 0x3fff) + 1};
  }
  if (c[0] == 'V' && c[1] == 'P' && c[2] == '8' && c[3] == 'X') {
    if (size < 10) return Malformed();
    return ImageHeader{ImageFormat::kWebp, Le24(d + 4) + 1, Le24(d + 7) + 1};
  }
  return Malformed();
}

}  // namespace

absl::string_view MimeType(ImageFormat format) {
  switch (format) {
    case ImageFormat::kJpeg:
      return "image/jpeg";
    case ImageFormat::kPng:
      return "image/png";
    case ImageFormat::kGif:
      return "image/gif";
    case ImageFormat::kWebp:
      return "image/webp";
  }
  return "application/octet-stream";
}

absl::StatusOr<ImageFormat> SniffFormat(absl::string_view bytes) {
  if (bytes.empty()) return ImageError(ImageErrorKind::kEmptyImage);
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const std::size_t n = bytes.size();
  // The same magic numbers, and lengths, as recipe's sniffer (the `infer` crate).
  if (n > 2 && p[0] == 0xff && p[1] == 0xd8 && p[2] == 0xff) return ImageFormat::kJpeg;
  if (n > 3 && p[0] == 0x89 && p[1] == 'P' && p[2] == 'N' && p[3] == 'G') return ImageFormat::kPng;
  if (n > 2 && p[0] == 'G' && p[1] == 'I' && p[2] == 'F') return ImageFormat::kGif;
  if (n > 11 && p[8] == 'W' && p[9] == 'E' && p[10] == 'B' && p[11] == 'P') {
    return ImageFormat::kWebp;
  }
  return ImageError(ImageErrorKind::kUnsupportedMediaType);
}

absl::StatusOr<ImageHeader> ReadImageHeader(absl::string_view bytes,
                                            std::uint32_t max_dimension_px) {
  absl::StatusOr<ImageFormat> format = SniffFormat(bytes);
  if (!format.ok()) return format.status();
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const std::size_t n = bytes.size();
  absl::StatusOr<ImageHeader> header;
  switch (*format) {
    case ImageFormat::kJpeg:
      header = JpegHeader(p, n);
      break;
    case ImageFormat::kPng:
      header = PngHeader(p, n);
      break;
    case ImageFormat::kGif:
      header = GifHeader(p, n);
      break;
    case ImageFormat::kWebp:
      header = WebpHeader(p, n);
      break;
  }
  if (!header.ok()) return header.status();
  if (header->width > max_dimension_px || header->height > max_dimension_px) {
    return ImageError(ImageErrorKind::kImageDimensionsTooLarge);
  }
  return header;
}

}  // namespace tandem::image
