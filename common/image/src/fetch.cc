#include "tandem/image/fetch.h"

#include <curl/curl.h>

#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tandem/image/errors.h"

namespace tandem::image {
namespace {

// One fetch's state, shared with curl's callbacks.
struct Transfer {
  const ImageFetcher::AddressFilter* filter = nullptr;
  std::size_t max_bytes = 0;
  std::string body;
  bool too_large = false;
  bool address_rejected = false;
  std::string rejected_class;
};

std::size_t OnBody(char* data, std::size_t size, std::size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::size_t n = size * count;
  if (n > t->max_bytes - t->body.size()) {
    t->too_large = true;
    return 0;  // makes curl stop with CURLE_WRITE_ERROR
  }
  t->body.append(data, n);
  return n;
}

curl_socket_t OnOpenSocket(void* user, curlsocktype purpose, curl_sockaddr* address) {
  auto* t = static_cast<Transfer*>(user);
  if (purpose != CURLSOCKTYPE_IPCXN || !(*t->filter)(&address->addr)) {
    t->address_rejected = true;
    t->rejected_class = std::string(AddressClassName(ClassifyAddress(&address->addr)));
    return CURL_SOCKET_BAD;
  }
  return socket(address->family, address->socktype, address->protocol);
}

struct CurlDeleter {
  void operator()(CURL* curl) const { curl_easy_cleanup(curl); }
};

void InitCurlOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

}  // namespace

ImageFetcher::ImageFetcher(UrlPolicy policy, std::size_t max_url_len)
    : policy_(std::move(policy)), max_url_len_(max_url_len), filter_(IsFetchableAddress) {
  InitCurlOnce();
}

absl::StatusOr<std::string> ImageFetcher::Fetch(absl::string_view first_url) const {
  const absl::Time deadline = absl::Now() + policy_.timeout;
  std::string url(first_url);
  for (int hop = 0; hop <= policy_.max_redirects; ++hop) {
    absl::StatusOr<ImageUrl> checked = CheckImageUrl(url, policy_, max_url_len_);
    if (!checked.ok()) return checked.status();
    const long left_ms = static_cast<long>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    if (left_ms <= 0) return ImageError(ImageErrorKind::kFetch, 0, 0, "timed out");

    std::unique_ptr<CURL, CurlDeleter> curl(curl_easy_init());
    if (curl == nullptr) return ImageError(ImageErrorKind::kFetch, 0, 0, "no curl handle");
    Transfer t;
    t.filter = &filter_;
    t.max_bytes = policy_.max_bytes;
    CURL* c = curl.get();
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);  // followed here, each hop checked
    curl_easy_setopt(c, CURLOPT_PROXY, "");
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, left_ms);
    curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(policy_.max_bytes));
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, OnBody);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, OnOpenSocket);
    curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, &t);
    const CURLcode rc = curl_easy_perform(c);
    if (t.address_rejected) {
      return ImageError(ImageErrorKind::kDestinationRejected, 0, 0,
                        absl::StrCat(checked->host, " resolves to a ", t.rejected_class, " address"));
    }
    if (t.too_large || rc == CURLE_FILESIZE_EXCEEDED) {
      return ImageError(ImageErrorKind::kImageTooLarge, t.body.size(), policy_.max_bytes);
    }
    if (rc == CURLE_OPERATION_TIMEDOUT) return ImageError(ImageErrorKind::kFetch, 0, 0, "timed out");
    if (rc != CURLE_OK) return ImageError(ImageErrorKind::kFetch, 0, 0, curl_easy_strerror(rc));
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    if (status >= 300 && status < 400) {
      char* location = nullptr;
      curl_easy_getinfo(c, CURLINFO_REDIRECT_URL, &location);
      if (location == nullptr) {
        return ImageError(ImageErrorKind::kFetch, 0, 0, absl::StrCat("HTTP status ", status));
      }
      url = location;
      continue;
    }
    if (status < 200 || status >= 300) {
      return ImageError(ImageErrorKind::kFetch, 0, 0, absl::StrCat("HTTP status ", status));
    }
    return std::move(t.body);
  }
  return ImageError(ImageErrorKind::kFetch, 0, 0, "too many redirects");
}

}  // namespace tandem::image
