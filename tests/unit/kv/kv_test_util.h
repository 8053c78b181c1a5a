#pragma once

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tandem::kv::testing {

// A fresh directory under the test temp dir, removed with everything in it.
class ScopedTempDir {
 public:
  ScopedTempDir() {
    std::string pattern = ::testing::TempDir() + "tandem_kv_XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed for " << pattern;
    path_ = pattern;
  }
  ~ScopedTempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Incompressible pseudo-random bytes, different for every seed (like float KV mantissas).
inline std::vector<std::uint8_t> RandomBlock(std::uint64_t seed, std::size_t size) {
  std::vector<std::uint8_t> out(size);
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& b : out) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b = static_cast<std::uint8_t>(x >> 24);
  }
  return out;
}

// Highly compressible bytes (repeating short pattern seeded per block).
inline std::vector<std::uint8_t> RepetitiveBlock(std::uint64_t seed, std::size_t size) {
  std::vector<std::uint8_t> out(size);
  for (std::size_t i = 0; i < size; ++i) out[i] = static_cast<std::uint8_t>((seed + i % 7) & 0xFF);
  return out;
}

inline constexpr std::int64_t kStartMs = 1'700'000'000'000;  // a fixed wall-clock instant

}  // namespace tandem::kv::testing
