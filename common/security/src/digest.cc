#include "tandem/security/digest.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <stdexcept>

#include "absl/strings/escaping.h"

namespace tandem::security {

std::string Sha256(absl::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), out, &len, EVP_sha256(), nullptr) != 1 || len != 32) {
    throw std::runtime_error("SHA-256 failed");  // OpenSSL without SHA-256: nothing can work
  }
  return std::string(reinterpret_cast<const char*>(out), len);
}

std::string Sha256Hex(absl::string_view data) { return absl::BytesToHexString(Sha256(data)); }

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  if (a.empty()) return true;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string RandomBytes(std::size_t n) {
  std::string out(n, '\0');
  if (n > 0 && RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) != 1) {
    throw std::runtime_error("the system's random source failed");
  }
  return out;
}

std::string Base64Url(absl::string_view bytes) { return absl::WebSafeBase64Escape(bytes); }

}  // namespace tandem::security
