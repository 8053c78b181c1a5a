#include "tandem/kernels/panels.h"

#include <cstring>
#include <new>

namespace tandem::kernels {

// 64 bytes: a panel column of 32 floats is two whole cache lines (one for 16-bit dtypes).
constexpr std::align_val_t kPanelAlign{64};

void PanelWeight::FreeAligned::operator()(std::byte* p) const { ::operator delete[](p, kPanelAlign); }

PanelWeight PanelWeight::Pack(const WeightView& rows) {
  PanelWeight packed;
  const std::size_t elem = DTypeSize(rows.dtype);
  const std::int64_t panels = (rows.rows + kPanelRows - 1) / kPanelRows;
  packed.bytes_ = static_cast<std::size_t>(panels * kPanelRows * rows.cols) * elem;
  packed.storage_.reset(static_cast<std::byte*>(::operator new[](packed.bytes_, kPanelAlign)));
  std::byte* dst = packed.storage_.get();
  std::memset(dst, 0, packed.bytes_);  // the last panel's rows past `rows`: zeros, never read out
  const auto* src = static_cast<const std::byte*>(rows.data);
  packed.view_ = rows;
  packed.view_.data = dst;
  packed.view_.layout = WeightLayout::kPanels;
  for (std::int64_t r = 0; r < rows.rows; ++r) {
    for (std::int64_t c = 0; c < rows.cols; ++c) {
      std::memcpy(dst + packed.view_.Index(r, c) * elem, src + (r * rows.cols + c) * elem, elem);
    }
  }
  return packed;
}

}  // namespace tandem::kernels
