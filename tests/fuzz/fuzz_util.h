#pragma once

// Helpers shared by the fuzz targets: splitting one input into parts, and handing bytes to the
// loaders that only take a path.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include <unistd.h>

namespace tandem::fuzz {

inline absl::string_view AsText(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Splits at every `sep` (kept parts may be empty): inputs stay plain text that mutators and the
// seed script can both write.
inline std::vector<absl::string_view> Split(absl::string_view text, char sep) {
  std::vector<absl::string_view> parts;
  for (std::size_t start = 0;;) {
    const std::size_t end = text.find(sep, start);
    parts.push_back(text.substr(start, end == absl::string_view::npos ? end : end - start));
    if (end == absl::string_view::npos) return parts;
    start = end + 1;
  }
}

// A scratch directory of this process (libFuzzer -jobs/-fork run several at once), removed at
// exit. On tmpfs where there is one: the loaders map files, and every input is written anew.
inline const std::string& ScratchDir() {
  // Never destroyed: the exit handler below still needs it after static destructors ran.
  static const std::string* dir = [] {
    namespace fs = std::filesystem;
    const fs::path base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    auto* d = new std::string((base / ("tandem-fuzz-" + std::to_string(getpid()))).string());
    fs::create_directories(*d);
    std::atexit([] {
      std::error_code ignored;
      fs::remove_all(ScratchDir(), ignored);
    });
    return d;
  }();
  return *dir;
}

inline void WriteFile(const std::string& path, absl::string_view bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) std::abort();
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) {
    std::abort();
  }
  std::fclose(f);
}

}  // namespace tandem::fuzz
