#pragma once

// Which image URLs tandem may fetch. Fetching is off unless the operator turns it on; then only
// http(s) URLs whose host is on the allow-list, and only to public unicast addresses: the check
// runs on every address the fetcher is about to connect to (after DNS, on each redirect), so a
// name that resolves to 127.0.0.1, or re-resolves there later (DNS rebinding), is refused.
//
//   UrlPolicy policy{.fetch_enabled = true, .allowed_hosts = {"images.example.com", ".cdn.net"}};
//   TANDEM_ASSIGN_OR_RETURN(ImageUrl url, CheckImageUrl(text, policy, limits.max_url_len));
//   // ImageFetcher (fetch.h) applies both checks: this one per hop, IsFetchableAddress per
//   // connection.
//
// Before the policy, recipe's own checks run in its order: a URL not starting with "http" (any
// case) is kInvalidUrl, one longer than max_url_len bytes kUrlTooLong.

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace tandem::image {

enum class AddressClass {
  kPublic,
  kUnspecified,    // 0.0.0.0/8, ::
  kLoopback,       // 127.0.0.0/8, ::1
  kPrivate,        // 10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7, fec0::/10
  kLinkLocal,      // 169.254/16, fe80::/10
  kMulticast,      // 224/4, ff00::/8
  kReserved,       // documentation, benchmarking, 240/4, broadcast, Teredo, discard, ...
};

absl::string_view AddressClassName(AddressClass c);

// IPv6 forms that carry an IPv4 address (mapped ::ffff:a.b.c.d, NAT64 64:ff9b::/96, 6to4
// 2002::/16, IPv4-compatible ::a.b.c.d) are classified by the IPv4 address they carry.
AddressClass ClassifyIpv4(std::uint32_t address);  // host byte order
AddressClass ClassifyIpv6(const std::uint8_t (&address)[16]);
AddressClass ClassifyAddress(const sockaddr* address);  // AF_INET/AF_INET6; others kReserved
// A numeric address ("10.0.0.1", "::ffff:127.0.0.1", "[fe80::1]"); InvalidArgument otherwise.
absl::StatusOr<AddressClass> ClassifyAddress(absl::string_view numeric);

// The connect-time check: true only for kPublic.
bool IsFetchableAddress(const sockaddr* address);

struct UrlPolicy {
  bool fetch_enabled = false;
  // Exact host names, or ".example.com" for any subdomain of example.com (not itself).
  std::vector<std::string> allowed_hosts;
  std::size_t max_bytes = 32u << 20;
  absl::Duration timeout = absl::Seconds(10);
  int max_redirects = 3;
};

struct ImageUrl {
  std::string scheme;  // "http" or "https"
  std::string host;    // lower case, without brackets or a trailing dot
  int port = 0;
};

// recipe's checks, then the policy's: kInvalidUrl, kUrlTooLong, or kDestinationRejected (fetching
// off, not http(s), user info, host not allowed, a literal address that is not public).
absl::StatusOr<ImageUrl> CheckImageUrl(absl::string_view url, const UrlPolicy& policy,
                                       std::size_t max_url_len);

}  // namespace tandem::image
