#pragma once

#include <algorithm>
#include <cstddef>

#include "tandem/kernels/backend.h"

namespace tandem::model::internal {

// A float buffer in the backend's memory that grows on demand and is freed with its owner.
// Forward passes size their activations per call without reallocating in steady state.
class ScratchBuffer {
 public:
  explicit ScratchBuffer(kernels::Backend* backend) : backend_(backend) {}
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  ~ScratchBuffer() { Release(); }

  // At least `count` floats; previous contents are not kept when it grows.
  float* Reserve(std::size_t count) {
    if (count > capacity_) {
      Release();
      capacity_ = std::max<std::size_t>(count, 1);
      data_ = backend_->AllocateFloats(capacity_);
    }
    return data_;
  }
  float* data() const { return data_; }

 private:
  void Release() {
    if (data_ != nullptr) backend_->Free(data_);
    data_ = nullptr;
    capacity_ = 0;
  }

  kernels::Backend* backend_;
  float* data_ = nullptr;
  std::size_t capacity_ = 0;
};

}  // namespace tandem::model::internal
