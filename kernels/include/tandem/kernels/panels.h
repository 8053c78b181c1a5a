#pragma once
// MatMul weights packed once into panels (dtype.h, WeightLayout::kPanels): the layout the CPU
// backend's panel MatMul reads, where each output is one FMA per column in column order (see
// docs/performance.md, "Panel MatMul"). Packing keeps the dtype (bf16 stays bf16, FP8 keeps its
// block scales), so a packed weight takes the bytes of the original plus at most one padded panel.
#include <cstddef>
#include <memory>

#include "tandem/kernels/dtype.h"

namespace tandem::kernels {

class PanelWeight {
 public:
  // The row-major `rows` view repacked; its scales (FP8) are shared, not copied, so they must
  // outlive the result.
  static PanelWeight Pack(const WeightView& rows);

  PanelWeight(PanelWeight&&) noexcept = default;
  PanelWeight& operator=(PanelWeight&&) noexcept = default;

  const WeightView& view() const { return view_; }
  std::size_t bytes() const { return bytes_; }

 private:
  PanelWeight() = default;
  struct FreeAligned {
    void operator()(std::byte* p) const;
  };
  std::unique_ptr<std::byte, FreeAligned> storage_;
  std::size_t bytes_ = 0;
  WeightView view_;
};

}  // namespace tandem::kernels
