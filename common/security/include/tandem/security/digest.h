#pragma once

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace tandem::security {

// SHA-256 of `data`: 32 raw bytes, and as 64 lowercase hex digits.
std::string Sha256(absl::string_view data);
std::string Sha256Hex(absl::string_view data);

// Whether a and b hold the same bytes, in time that depends on their lengths only (never on
// where they first differ), so an attacker timing it learns nothing about the stored value.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

// `n` bytes from the operating system's cryptographic random source.
std::string RandomBytes(std::size_t n);

// URL-safe base64 without padding (RFC 4648 section 5).
std::string Base64Url(absl::string_view bytes);

}  // namespace tandem::security
