#include "tandem/image/data_url.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "tandem/image/errors.h"

namespace tandem::image {
namespace {

bool IsAsciiWhitespace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r';
}

bool IsTokenChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
         absl::string_view("!#$%&'*+-.^_`|~").find(c) != absl::string_view::npos;
}

// The WHATWG URL parser's trimming: C0 controls and spaces at the ends, tabs and newlines anywhere.
std::string Clean(absl::string_view url) {
  while (!url.empty() && static_cast<unsigned char>(url.front()) <= 0x20) url.remove_prefix(1);
  while (!url.empty() && static_cast<unsigned char>(url.back()) <= 0x20) url.remove_suffix(1);
  std::string out;
  out.reserve(url.size());
  for (char c : url) {
    if (c != '\t' && c != '\n' && c != '\r') out.push_back(c);
  }
  return out;
}

// "type/subtype" of a media type, lower-cased; empty when it is not one.
std::string MimeEssence(absl::string_view mime) {
  mime = absl::StripAsciiWhitespace(mime.substr(0, mime.find(';')));
  const std::size_t slash = mime.find('/');
  if (slash == absl::string_view::npos || slash == 0 || slash + 1 == mime.size()) return "";
  for (std::size_t i = 0; i < mime.size(); ++i) {
    if (i != slash && !IsTokenChar(mime[i])) return "";
  }
  return absl::AsciiStrToLower(mime);
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string PercentDecode(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && HexValue(s[i + 1]) >= 0 && HexValue(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2])));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

int Base64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// WHATWG forgiving-base64 decode: whitespace ignored, padding optional, leftover bits dropped.
bool ForgivingBase64(absl::string_view in, std::string* out) {
  std::string s;
  s.reserve(in.size());
  for (char c : in) {
    if (!IsAsciiWhitespace(c)) s.push_back(c);
  }
  if (s.size() % 4 == 0) {
    if (absl::EndsWith(s, "==")) {
      s.resize(s.size() - 2);
    } else if (absl::EndsWith(s, "=")) {
      s.resize(s.size() - 1);
    }
  }
  if (s.size() % 4 == 1) return false;
  out->clear();
  out->reserve(s.size() / 4 * 3 + 2);
  std::uint32_t buffer = 0;
  int bits = 0;
  for (char c : s) {
    const int v = Base64Value(c);
    if (v < 0) return false;
    buffer = (buffer << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<char>((buffer >> bits) & 0xff));
    }
  }
  return true;
}

bool IsImageMime(absl::string_view essence) {
  return essence == "image/jpeg" || essence == "image/jpg" || essence == "image/png" ||
         essence == "image/gif" || essence == "image/webp";
}

// recipe's size estimate from the undecoded URL (3 bytes per 4 base64 characters; a
// percent-escape is one byte in three characters).
std::size_t EstimatedDecodedLength(absl::string_view url) {
  const std::size_t comma = url.find(',');
  if (comma == absl::string_view::npos) return 0;
  const absl::string_view header = url.substr(0, comma);
  const absl::string_view body = url.substr(comma + 1);
  if (absl::EndsWith(header, ";base64")) return body.size() / 4 * 3;
  std::size_t escapes = 0;
  for (char c : body) escapes += c == '%';
  return body.size() > 2 * escapes ? body.size() - 2 * escapes : 0;
}

}  // namespace

absl::StatusOr<DataUrlParts> ParseDataUrl(absl::string_view raw) {
  const std::string url = Clean(raw);
  if (url.size() < 5 || !absl::EqualsIgnoreCase(absl::string_view(url).substr(0, 5), "data:")) {
    return ImageError(ImageErrorKind::kInvalidDataUrl);
  }
  const std::size_t comma = url.find(',', 5);
  if (comma == std::string::npos) return ImageError(ImageErrorKind::kInvalidDataUrl);
  absl::string_view header = absl::string_view(url).substr(5, comma - 5);
  DataUrlParts parts;
  // ";" then spaces then "base64", in any case, at the end of the header.
  absl::string_view trimmed = absl::StripTrailingAsciiWhitespace(header);
  if (trimmed.size() >= 6 && absl::EqualsIgnoreCase(trimmed.substr(trimmed.size() - 6), "base64")) {
    absl::string_view before = absl::StripTrailingAsciiWhitespace(trimmed.substr(0, trimmed.size() - 6));
    if (!before.empty() && before.back() == ';') {
      parts.base64 = true;
      header = before.substr(0, before.size() - 1);
    }
  }
  parts.mime_type = MimeEssence(header);
  if (parts.mime_type.empty()) parts.mime_type = "text/plain";
  const absl::string_view body = absl::string_view(url).substr(comma + 1);
  parts.body = std::string(body.substr(0, body.find('#')));
  return parts;
}

absl::StatusOr<std::string> DecodeDataUrl(absl::string_view raw, std::size_t max_image_bytes) {
  absl::StatusOr<DataUrlParts> parts = ParseDataUrl(raw);
  if (!parts.ok()) return parts.status();
  if (!IsImageMime(parts->mime_type)) return ImageError(ImageErrorKind::kUnsupportedMediaType);
  const std::size_t estimated = EstimatedDecodedLength(raw);
  if (estimated > max_image_bytes) {
    return ImageError(ImageErrorKind::kImageTooLarge, estimated, max_image_bytes);
  }
  std::string bytes = PercentDecode(parts->body);
  if (parts->base64) {
    std::string decoded;
    if (!ForgivingBase64(bytes, &decoded)) return ImageError(ImageErrorKind::kInvalidDataUrl);
    bytes = std::move(decoded);
  }
  if (bytes.size() > max_image_bytes) {
    return ImageError(ImageErrorKind::kImageTooLarge, bytes.size(), max_image_bytes);
  }
  if (bytes.empty()) return ImageError(ImageErrorKind::kEmptyImage);
  return bytes;
}

}  // namespace tandem::image
