#pragma once

// Downloads an image URL under a UrlPolicy (url_policy.h), with libcurl: every hop's URL is
// checked (scheme, allow-list, literal addresses), every address curl is about to connect to is
// checked at connect time (so DNS rebinding cannot reach internal addresses), redirects are
// followed by hand (each one checked again, at most policy.max_redirects), the body is cut off
// past policy.max_bytes, the whole fetch past policy.timeout, and no proxy is used.
//
//   UrlPolicy policy{.fetch_enabled = true, .allowed_hosts = {"images.example.com"}};
//   ImageFetcher fetcher(policy, limits.max_url_len);
//   absl::StatusOr<std::string> bytes = fetcher.Fetch(url);
//
// Failures (errors.h): recipe's kInvalidUrl / kUrlTooLong, kDestinationRejected (policy or
// address), kImageTooLarge (body over max_bytes), kFetch (network, HTTP status, timeout).
// Thread-safe: each Fetch uses its own curl handle.

#include <sys/socket.h>

#include <cstddef>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tandem/image/url_policy.h"

namespace tandem::image {

class ImageFetcher {
 public:
  ImageFetcher(UrlPolicy policy, std::size_t max_url_len);

  // Which resolved addresses may be connected to; IsFetchableAddress unless replaced (tests use
  // this to reach a server on loopback).
  using AddressFilter = std::function<bool(const sockaddr*)>;
  void set_address_filter(AddressFilter filter) { filter_ = std::move(filter); }

  absl::StatusOr<std::string> Fetch(absl::string_view url) const;

 private:
  UrlPolicy policy_;
  std::size_t max_url_len_;
  AddressFilter filter_;
};

}  // namespace tandem::image
