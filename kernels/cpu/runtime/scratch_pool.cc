#include "runtime/scratch_pool.h"

#include <algorithm>
#include <new>

namespace tandem::kernels::cpu {
namespace {

constexpr std::align_val_t kScratchAlign{64};

void FreeBuffer(std::byte* data) { ::operator delete[](data, kScratchAlign); }

}  // namespace

ScratchPool::Lease::Lease(Lease&& other) noexcept
    : pool_(other.pool_), data_(other.data_), bytes_(other.bytes_) {
  other.pool_ = nullptr;
}

ScratchPool::Lease::~Lease() {
  if (pool_ != nullptr) pool_->Release({data_, bytes_});
}

ScratchPool::~ScratchPool() {
  for (const Buffer& b : idle_) FreeBuffer(b.data);
}

ScratchPool::Lease ScratchPool::Acquire(std::size_t bytes) {
  bytes = std::max<std::size_t>(bytes, 64);
  Buffer taken{nullptr, 0};
  {
    std::lock_guard<std::mutex> lock(mu_);
    // The smallest idle buffer that fits; else the largest, to be replaced by one that does (so
    // that the pool does not keep a buffer too small for every request it sees).
    auto fits = idle_.end(), largest = idle_.end();
    for (auto it = idle_.begin(); it != idle_.end(); ++it) {
      if (it->bytes >= bytes && (fits == idle_.end() || it->bytes < fits->bytes)) fits = it;
      if (largest == idle_.end() || it->bytes > largest->bytes) largest = it;
    }
    const auto pick = fits != idle_.end() ? fits : largest;
    if (pick != idle_.end()) {
      taken = *pick;
      idle_.erase(pick);
    }
  }
  if (taken.bytes < bytes) {
    if (taken.data != nullptr) FreeBuffer(taken.data);
    taken = {static_cast<std::byte*>(::operator new[](bytes, kScratchAlign)), bytes};
  }
  return Lease(this, taken.data, taken.bytes);
}

void ScratchPool::Release(Buffer buffer) {
  std::lock_guard<std::mutex> lock(mu_);
  idle_.push_back(buffer);
}

std::size_t ScratchPool::idle_buffers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return idle_.size();
}

std::size_t ScratchPool::idle_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::size_t total = 0;
  for (const Buffer& b : idle_) total += b.bytes;
  return total;
}

}  // namespace tandem::kernels::cpu
