#include "tandem/image/url_policy.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tandem/image/errors.h"

namespace tandem::image {
namespace {

bool InV4(std::uint32_t a, std::uint32_t prefix, int bits) {
  const std::uint32_t mask = bits == 0 ? 0 : ~std::uint32_t{0} << (32 - bits);
  return (a & mask) == (prefix & mask);
}

constexpr std::uint32_t V4(int a, int b, int c, int d) {
  return (std::uint32_t(a) << 24) | (std::uint32_t(b) << 16) | (std::uint32_t(c) << 8) |
         std::uint32_t(d);
}

std::uint32_t V4At(const std::uint8_t* p) { return V4(p[0], p[1], p[2], p[3]); }

bool AllZero(const std::uint8_t* p, int n) {
  for (int i = 0; i < n; ++i) {
    if (p[i] != 0) return false;
  }
  return true;
}

absl::Status Rejected(absl::string_view why) {
  return ImageError(ImageErrorKind::kDestinationRejected, 0, 0, why);
}

bool HostAllowed(absl::string_view host, const std::vector<std::string>& allowed) {
  for (const std::string& entry : allowed) {
    const std::string e = absl::AsciiStrToLower(entry);
    if (!e.empty() && e[0] == '.') {
      if (host.size() > e.size() && absl::EndsWith(host, e)) return true;
    } else if (host == e) {
      return true;
    }
  }
  return false;
}

}  // namespace

absl::string_view AddressClassName(AddressClass c) {
  switch (c) {
    case AddressClass::kPublic: return "public";
    case AddressClass::kUnspecified: return "unspecified";
    case AddressClass::kLoopback: return "loopback";
    case AddressClass::kPrivate: return "private";
    case AddressClass::kLinkLocal: return "link-local";
    case AddressClass::kMulticast: return "multicast";
    case AddressClass::kReserved: return "reserved";
  }
  return "reserved";
}

AddressClass ClassifyIpv4(std::uint32_t a) {
  if (InV4(a, V4(0, 0, 0, 0), 8)) return AddressClass::kUnspecified;
  if (InV4(a, V4(127, 0, 0, 0), 8)) return AddressClass::kLoopback;
  if (InV4(a, V4(10, 0, 0, 0), 8) || InV4(a, V4(172, 16, 0, 0), 12) ||
      InV4(a, V4(192, 168, 0, 0), 16) || InV4(a, V4(100, 64, 0, 0), 10)) {
    return AddressClass::kPrivate;
  }
  if (InV4(a, V4(169, 254, 0, 0), 16)) return AddressClass::kLinkLocal;
  if (InV4(a, V4(224, 0, 0, 0), 4)) return AddressClass::kMulticast;
  if (InV4(a, V4(192, 0, 0, 0), 24) || InV4(a, V4(192, 0, 2, 0), 24) ||
      InV4(a, V4(192, 88, 99, 0), 24) || InV4(a, V4(198, 18, 0, 0), 15) ||
      InV4(a, V4(198, 51, 100, 0), 24) || InV4(a, V4(203, 0, 113, 0), 24) ||
      InV4(a, V4(240, 0, 0, 0), 4)) {
    return AddressClass::kReserved;  // includes 255.255.255.255
  }
  return AddressClass::kPublic;
}

AddressClass ClassifyIpv6(const std::uint8_t (&a)[16]) {
  static constexpr std::uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  static constexpr std::uint8_t kNat64[12] = {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
  if (std::memcmp(a, kMapped, 12) == 0 || std::memcmp(a, kNat64, 12) == 0) {
    return ClassifyIpv4(V4At(a + 12));
  }
  if (AllZero(a, 15)) {
    if (a[15] == 0) return AddressClass::kUnspecified;
    if (a[15] == 1) return AddressClass::kLoopback;
  }
  if (AllZero(a, 12)) return ClassifyIpv4(V4At(a + 12));  // IPv4-compatible (deprecated)
  if (a[0] == 0x20 && a[1] == 0x02) return ClassifyIpv4(V4At(a + 2));  // 6to4
  if ((a[0] & 0xfe) == 0xfc) return AddressClass::kPrivate;             // fc00::/7
  if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80) return AddressClass::kLinkLocal;  // fe80::/10
  if (a[0] == 0xfe && (a[1] & 0xc0) == 0xc0) return AddressClass::kPrivate;    // fec0::/10
  if (a[0] == 0xff) return AddressClass::kMulticast;
  if (a[0] == 0x00 && a[1] == 0x64 && a[2] == 0xff && a[3] == 0x9b && a[4] == 0 && a[5] == 1) {
    return AddressClass::kPrivate;  // 64:ff9b:1::/48, local-use NAT64
  }
  if ((a[0] == 0x01 && a[1] == 0x00 && AllZero(a + 2, 6)) ||  // 100::/64 discard
      (a[0] == 0x20 && a[1] == 0x01 && a[2] == 0x0d && a[3] == 0xb8) ||  // documentation
      (a[0] == 0x20 && a[1] == 0x01 && a[2] == 0x00 && a[3] == 0x00) ||  // Teredo
      (a[0] & 0xe0) != 0x20) {  // outside 2000::/3, the global unicast space
    return AddressClass::kReserved;
  }
  return AddressClass::kPublic;
}

AddressClass ClassifyAddress(const sockaddr* address) {
  if (address == nullptr) return AddressClass::kReserved;
  if (address->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(address);
    return ClassifyIpv4(ntohl(in->sin_addr.s_addr));
  }
  if (address->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(address);
    std::uint8_t bytes[16];
    std::memcpy(bytes, in6->sin6_addr.s6_addr, 16);
    return ClassifyIpv6(bytes);
  }
  return AddressClass::kReserved;
}

absl::StatusOr<AddressClass> ClassifyAddress(absl::string_view numeric) {
  if (numeric.size() >= 2 && numeric.front() == '[' && numeric.back() == ']') {
    numeric = numeric.substr(1, numeric.size() - 2);
  }
  const std::string text(numeric);
  in_addr v4;
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) return ClassifyIpv4(ntohl(v4.s_addr));
  in6_addr v6;
  if (inet_pton(AF_INET6, text.c_str(), &v6) == 1) {
    std::uint8_t bytes[16];
    std::memcpy(bytes, v6.s6_addr, 16);
    return ClassifyIpv6(bytes);
  }
  return absl::InvalidArgumentError(absl::StrCat("not a numeric address: ", numeric));
}

bool IsFetchableAddress(const sockaddr* address) {
  return ClassifyAddress(address) == AddressClass::kPublic;
}

absl::StatusOr<ImageUrl> CheckImageUrl(absl::string_view url, const UrlPolicy& policy,
                                       std::size_t max_url_len) {
  if (url.size() < 4 || !absl::EqualsIgnoreCase(url.substr(0, 4), "http")) {
    return ImageError(ImageErrorKind::kInvalidUrl, 0, 0, url);
  }
  if (url.size() > max_url_len) return ImageError(ImageErrorKind::kUrlTooLong, url.size(), max_url_len);
  if (!policy.fetch_enabled) return Rejected("image URLs are not fetched by this server");
  for (char c : url) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f || c == '\\') return Rejected("malformed URL");
  }
  ImageUrl out;
  const std::size_t colon = url.find("://");
  if (colon == absl::string_view::npos) return Rejected("malformed URL");
  out.scheme = absl::AsciiStrToLower(url.substr(0, colon));
  if (out.scheme != "http" && out.scheme != "https") return Rejected("only http and https");
  absl::string_view rest = url.substr(colon + 3);
  absl::string_view authority = rest.substr(0, rest.find_first_of("/?#"));
  if (authority.find('@') != absl::string_view::npos) return Rejected("user info in the URL");
  absl::string_view host = authority;
  absl::string_view port;
  if (!host.empty() && host.front() == '[') {
    const std::size_t close = host.find(']');
    if (close == absl::string_view::npos) return Rejected("malformed URL");
    port = host.substr(close + 1);
    host = host.substr(0, close + 1);
  } else if (const std::size_t c = host.rfind(':'); c != absl::string_view::npos) {
    port = host.substr(c);
    host = host.substr(0, c);
  }
  out.port = out.scheme == "https" ? 443 : 80;
  if (!port.empty()) {
    if (port.front() != ':' || !absl::SimpleAtoi(port.substr(1), &out.port) || out.port <= 0 ||
        out.port > 65535) {
      return Rejected("malformed port");
    }
  }
  std::string h = absl::AsciiStrToLower(host);
  if (!h.empty() && h.back() == '.') h.pop_back();
  if (h.empty()) return Rejected("no host");
  absl::StatusOr<AddressClass> literal = ClassifyAddress(h);
  if (literal.ok() && *literal != AddressClass::kPublic) {
    return Rejected(absl::StrCat("a ", AddressClassName(*literal), " address"));
  }
  if (h.front() == '[') h = h.substr(1, h.size() - 2);
  if (!HostAllowed(h, policy.allowed_hosts)) return Rejected(absl::StrCat("host not allowed: ", h));
  out.host = std::move(h);
  return out;
}

}  // namespace tandem::image
