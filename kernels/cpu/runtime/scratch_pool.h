#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace tandem::kernels::cpu {

// Work buffers of the MatMuls (their activations repacked: 32 MiB for 2,048 rows x 4,096 columns
// in float32; the panel kernel's widened weight slices) kept from call to call. A fresh allocation
// that large is a fresh mapping (glibc maps blocks over its 32 MiB threshold, and trims the heap
// top back to the system), and the first touch of every page faults and clears it: 4-5% of a
// 2,048-token prefill went to that.
//
// Each lease holds one buffer alone, so concurrent callers never share one; a released buffer
// waits for the next lease. The pool keeps as many buffers as leases were ever held at once, each
// as large as the largest request it served: the same memory the peak call needed anyway.
class ScratchPool {
 public:
  class Lease {
   public:
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&&) = delete;
    Lease(const Lease&) = delete;
    ~Lease();
    // At least the bytes asked for, 64-byte aligned, contents unspecified.
    template <typename T>
    T* As() const {
      return reinterpret_cast<T*>(data_);
    }

   private:
    friend class ScratchPool;
    Lease(ScratchPool* pool, std::byte* data, std::size_t bytes)
        : pool_(pool), data_(data), bytes_(bytes) {}
    ScratchPool* pool_;
    std::byte* data_;
    std::size_t bytes_;
  };

  ScratchPool() = default;
  ScratchPool(const ScratchPool&) = delete;
  ScratchPool& operator=(const ScratchPool&) = delete;
  ~ScratchPool();  // after every lease ended

  Lease Acquire(std::size_t bytes);

  // Buffers waiting for a lease, and their bytes (for tests and memory accounting).
  std::size_t idle_buffers() const;
  std::size_t idle_bytes() const;

 private:
  struct Buffer {
    std::byte* data;
    std::size_t bytes;
  };
  void Release(Buffer buffer);

  mutable std::mutex mu_;
  std::vector<Buffer> idle_;  // guarded by mu_
};

}  // namespace tandem::kernels::cpu
