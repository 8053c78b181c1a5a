#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "absl/status/statusor.h"

namespace tandem {

// A read-only memory mapping of a whole file. Weights are used in place from the mapping so that
// loading a checkpoint costs page faults, not copies. Move-only; unmaps on destruction.
class MappedFile {
 public:
  static absl::StatusOr<MappedFile> Open(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::span<const std::uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(const std::uint8_t* data, std::size_t size, std::string path)
      : data_(data), size_(size), path_(std::move(path)) {}
  void Reset();

  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
  std::string path_;
};

}  // namespace tandem
