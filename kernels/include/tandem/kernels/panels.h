#pragma once
// MatMul weights packed once into one of the CPU backend's packed layouts (dtype.h):
//  - panels (WeightLayout::kPanels), which the panel MatMul reads, where each output is one FMA
//    per column in column order (see docs/performance.md, "Panel MatMul"). Packing keeps the dtype
//    (bf16 stays bf16, FP8 keeps its block scales), so a packed weight takes the bytes of the
//    original plus at most one padded panel;
//  - bf16 tiles (WeightLayout::kBf16Tiles, bf16 weights only), AMX's tile operand layout, which the
//    AMX MatMul (CpuBackendOptions::bf16_matmul) reads, padded to whole 16 x 32 blocks.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "tandem/kernels/dtype.h"

namespace tandem::kernels {

class PanelWeight {
 public:
  // The row-major `rows` view repacked into `layout` (kPanels, or kBf16Tiles for a bf16 view); its
  // scales (FP8) are shared, not copied, so they must outlive the result.
  static PanelWeight Pack(const WeightView& rows, WeightLayout layout = WeightLayout::kPanels);
  // A SwiGLU pair (bf16, same shape) as one kBf16Tiles weight for Backend::GatedMatMul: gate's
  // 16-row groups and up's in turn (gate 0, up 0, gate 1, ...), each padded with zero rows to a
  // whole group, so the view has 2 x 16 x ceil(rows / 16) rows. std::invalid_argument otherwise.
  static PanelWeight PackGated(const WeightView& gate, const WeightView& up);
  // Row-major bf16 matrices with the same columns stacked as one kBf16Tiles weight for
  // Backend::StackedMatMul: each part's 16-row groups in turn, each part padded with zero rows to
  // whole groups. std::invalid_argument otherwise.
  static PanelWeight PackStacked(std::span<const WeightView> parts);

  PanelWeight(PanelWeight&&) noexcept = default;
  PanelWeight& operator=(PanelWeight&&) noexcept = default;

  const WeightView& view() const { return view_; }
  std::size_t bytes() const { return bytes_; }

 private:
  PanelWeight() = default;
  // Zeroed bf16 tiles for `groups` row groups of like.cols columns, viewed as `rows` rows.
  static PanelWeight ZeroTiles(const WeightView& like, std::int64_t rows, std::int64_t groups);
  std::uint16_t* tiles();
  struct FreeAligned {
    void operator()(std::byte* p) const;
  };
  std::unique_ptr<std::byte, FreeAligned> storage_;
  std::size_t bytes_ = 0;
  WeightView view_;
};

}  // namespace tandem::kernels
