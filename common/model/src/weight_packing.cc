#include "weight_packing.h"

namespace tandem::model::internal {

void PackedWeights::Pack(kernels::WeightView& w) {
  if (!enabled_ || w.empty() || w.layout != kernels::WeightLayout::kRows) {
    return;
  }
  packed_.push_back(kernels::PanelWeight::Pack(w));
  w = packed_.back().view();
}

}  // namespace tandem::model::internal
