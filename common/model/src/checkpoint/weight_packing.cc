#include "checkpoint/weight_packing.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <span>

namespace tandem::model::internal {

namespace {

void Reclaim(const kernels::WeightView& w) {
  // The row-major bytes are not read again (a view listed here is MatMul's alone): ask the kernel
  // to reclaim their whole pages, so that a model mapped from its checkpoint does not keep both
  // copies resident. MADV_PAGEOUT keeps the contents (a mapped file's clean pages are dropped and
  // read back if touched; anonymous memory stays as it is without swap), so a page shared with a
  // neighbouring tensor is only slower to reach, never changed. Best effort: errors are ignored.
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(w.data);
  const std::uintptr_t end =
      begin + static_cast<std::uintptr_t>(w.numel()) * kernels::DTypeSize(w.dtype);
  const std::uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_PAGEOUT);
}

}  // namespace

void PackedWeights::Pack(kernels::WeightView& w) {
  if (w.empty() || w.layout != kernels::WeightLayout::kRows) return;
  const kernels::WeightLayout layout = backend_.preferred_matmul_layout(w.dtype);
  if (layout == kernels::WeightLayout::kRows) return;
  packed_.push_back(kernels::PanelWeight::Pack(w, layout));
  Reclaim(w);
  w = packed_.back().view();
}

bool PackedWeights::PackGated(const kernels::WeightView& gate, const kernels::WeightView& up,
                              kernels::WeightView* gate_up) {
  if (gate.empty() || !backend_.fuses_matmuls(gate.dtype) || up.dtype != gate.dtype ||
      gate.rows != up.rows || gate.cols != up.cols || gate.layout != kernels::WeightLayout::kRows ||
      up.layout != kernels::WeightLayout::kRows) {
    return false;
  }
  packed_.push_back(kernels::PanelWeight::PackGated(gate, up));
  Reclaim(gate);
  Reclaim(up);
  *gate_up = packed_.back().view();
  return true;
}

bool PackedWeights::PackStacked(std::initializer_list<kernels::WeightView> parts,
                                kernels::WeightView* stacked) {
  if (parts.size() == 0) return false;
  const kernels::WeightView& first = *parts.begin();
  for (const kernels::WeightView& p : parts) {
    if (p.empty() || !backend_.fuses_matmuls(p.dtype) || p.dtype != first.dtype ||
        p.cols != first.cols || p.layout != kernels::WeightLayout::kRows) {
      return false;
    }
  }
  packed_.push_back(kernels::PanelWeight::PackStacked(std::span(parts.begin(), parts.size())));
  for (const kernels::WeightView& p : parts) Reclaim(p);
  *stacked = packed_.back().view();
  return true;
}

}  // namespace tandem::model::internal
