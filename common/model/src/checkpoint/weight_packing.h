#pragma once
// Matrices packed once, at model load, into the layout the backend's MatMul prefers.
#include <initializer_list>
#include <vector>

#include "tandem/kernels/backend.h"
#include "tandem/kernels/panels.h"

namespace tandem::model::internal {

// Repacks each listed matrix into the layout `backend` prefers for its dtype, when that is a packed
// one, and points it at the packed copy; the copies are returned and must outlive the views.
// Empty views are skipped. Every dtype is packed, FP8 included, so that a quantised checkpoint
// keeps its float32 twin's exact results. A matrix another op reads besides MatMul (an embedding
// table, a weight sliced at arbitrary rows) must not be listed.
class PackedWeights {
 public:
  explicit PackedWeights(const kernels::Backend& backend) : backend_(backend) {}

  void Pack(kernels::WeightView& w);
  void Pack(std::initializer_list<kernels::WeightView*> ws) {
    for (kernels::WeightView* w : ws) Pack(*w);
  }
  // Where the backend fuses a SwiGLU pair (Backend::fuses_matmuls), packs gate and up as one
  // weight for Backend::GatedMatMul into *gate_up and returns true (gate and up are then not
  // read again); false and nothing packed otherwise.
  bool PackGated(const kernels::WeightView& gate, const kernels::WeightView& up,
                 kernels::WeightView* gate_up);
  // Likewise matrices with the same input stacked for Backend::StackedMatMul.
  bool PackStacked(std::initializer_list<kernels::WeightView> parts, kernels::WeightView* stacked);
  std::vector<kernels::PanelWeight> Take() && { return std::move(packed_); }

 private:
  const kernels::Backend& backend_;
  std::vector<kernels::PanelWeight> packed_;
};

}  // namespace tandem::model::internal
