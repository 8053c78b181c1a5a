#include "tandem/kernels/panels.h"

#include <cstdint>
#include <cstring>
#include <new>
#include <stdexcept>
#include <vector>

namespace tandem::kernels {

// 64 bytes: a panel column of 32 floats is two whole cache lines (one for 16-bit dtypes).
constexpr std::align_val_t kPanelAlign{64};

namespace {

// Row r's elements go to column positions r % kPanelRows of panel r / kPanelRows.
template <typename T>
void Scatter(const std::byte* src, std::int64_t rows, std::int64_t cols, std::byte* dst) {
  const T* from = reinterpret_cast<const T*>(src);
  T* to = reinterpret_cast<T*>(dst);
  for (std::int64_t r = 0; r < rows; ++r) {
    T* panel_row = to + (r / kPanelRows) * cols * kPanelRows + r % kPanelRows;
    const T* row = from + r * cols;
    for (std::int64_t c = 0; c < cols; ++c) panel_row[c * kPanelRows] = row[c];
  }
}

// Element (r, c) goes where WeightView::Index puts it; the padding stays zero, so that padded
// products are 0 x 0 and every sum stays finite. Whole column pairs move as one 32-bit word:
// within a row group, pair p of every row sits in tile row p (the blocks of 16 pairs follow each
// other), 16 pairs apart, so a large checkpoint packs at memory speed rather than an index
// computation per element.
void ScatterTiles(const std::uint16_t* from, std::int64_t rows, std::int64_t cols,
                  const WeightView& packed, std::uint16_t* to) {
  const std::int64_t chunks = (cols + kTileChunkCols - 1) / kTileChunkCols;
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::uint16_t* row = from + r * cols;
    std::uint16_t* group = to + r / kTileGroupRows * chunks * kTileGroupRows * kTileChunkCols +
                           r % kTileGroupRows * 2;
    for (std::int64_t p = 0; p < cols / 2; ++p) {
      std::memcpy(group + p * 2 * kTileGroupRows, row + 2 * p, 2 * sizeof(std::uint16_t));
    }
    if (cols % 2 != 0) to[packed.Index(r, cols - 1)] = row[cols - 1];
  }
}

}  // namespace

void PanelWeight::FreeAligned::operator()(std::byte* p) const {
  ::operator delete[](p, kPanelAlign);
}

PanelWeight PanelWeight::PackGated(const WeightView& gate, const WeightView& up) {
  if (gate.dtype != DType::kBF16 || up.dtype != DType::kBF16 || gate.rows != up.rows ||
      gate.cols != up.cols || gate.layout != WeightLayout::kRows ||
      up.layout != WeightLayout::kRows) {
    throw std::invalid_argument("a gated pair is two row-major bf16 matrices of one shape");
  }
  const PanelWeight g = Pack(gate, WeightLayout::kBf16Tiles);
  const PanelWeight u = Pack(up, WeightLayout::kBf16Tiles);
  const std::int64_t groups = (gate.rows + kTileGroupRows - 1) / kTileGroupRows;
  const std::size_t group_bytes = g.bytes_ / static_cast<std::size_t>(groups);
  PanelWeight packed;
  packed.bytes_ = 2 * g.bytes_;
  packed.storage_.reset(static_cast<std::byte*>(::operator new[](packed.bytes_, kPanelAlign)));
  for (std::int64_t i = 0; i < groups; ++i) {
    std::memcpy(packed.storage_.get() + 2 * i * group_bytes, g.storage_.get() + i * group_bytes,
                group_bytes);
    std::memcpy(packed.storage_.get() + (2 * i + 1) * group_bytes,
                u.storage_.get() + i * group_bytes, group_bytes);
  }
  packed.view_ = g.view_;
  packed.view_.data = packed.storage_.get();
  packed.view_.rows = 2 * groups * kTileGroupRows;
  return packed;
}

PanelWeight PanelWeight::PackStacked(std::span<const WeightView> parts) {
  if (parts.empty()) throw std::invalid_argument("nothing to stack");
  std::vector<PanelWeight> packed;
  std::size_t bytes = 0;
  std::int64_t rows = 0;
  for (const WeightView& part : parts) {
    if (part.dtype != DType::kBF16 || part.layout != WeightLayout::kRows ||
        part.cols != parts[0].cols || part.rows <= 0) {
      throw std::invalid_argument("stacked matrices are row-major bf16 with the same columns");
    }
    packed.push_back(Pack(part, WeightLayout::kBf16Tiles));
    bytes += packed.back().bytes_;
    rows += (part.rows + kTileGroupRows - 1) / kTileGroupRows * kTileGroupRows;
  }
  PanelWeight stacked;
  stacked.bytes_ = bytes;
  stacked.storage_.reset(static_cast<std::byte*>(::operator new[](bytes, kPanelAlign)));
  std::byte* to = stacked.storage_.get();
  for (const PanelWeight& part : packed) {
    std::memcpy(to, part.storage_.get(), part.bytes_);
    to += part.bytes_;
  }
  stacked.view_ = packed[0].view_;
  stacked.view_.data = stacked.storage_.get();
  stacked.view_.rows = rows;
  return stacked;
}

PanelWeight PanelWeight::Pack(const WeightView& rows, WeightLayout layout) {
  PanelWeight packed;
  const std::size_t elem = DTypeSize(rows.dtype);
  if (layout == WeightLayout::kBf16Tiles) {
    if (rows.dtype != DType::kBF16) {
      throw std::invalid_argument("bf16 tiles hold bf16 weights only");
    }
    const std::int64_t groups = (rows.rows + kTileGroupRows - 1) / kTileGroupRows;
    const std::int64_t chunks = (rows.cols + kTileChunkCols - 1) / kTileChunkCols;
    packed.bytes_ = static_cast<std::size_t>(groups * chunks * kTileGroupRows * kTileChunkCols) *
                    elem;
    packed.storage_.reset(static_cast<std::byte*>(::operator new[](packed.bytes_, kPanelAlign)));
    std::memset(packed.storage_.get(), 0, packed.bytes_);
    packed.view_ = rows;
    packed.view_.data = packed.storage_.get();
    packed.view_.layout = layout;
    ScatterTiles(static_cast<const std::uint16_t*>(rows.data), rows.rows, rows.cols, packed.view_,
                 reinterpret_cast<std::uint16_t*>(packed.storage_.get()));
    return packed;
  }
  const std::int64_t panels = (rows.rows + kPanelRows - 1) / kPanelRows;
  packed.bytes_ = static_cast<std::size_t>(panels * kPanelRows * rows.cols) * elem;
  packed.storage_.reset(static_cast<std::byte*>(::operator new[](packed.bytes_, kPanelAlign)));
  std::byte* dst = packed.storage_.get();
  // The last panel's rows past `rows` are computed and never read out; zeros keep them finite.
  // Every other byte is written by the scatter below.
  if (rows.rows % kPanelRows != 0) {
    const std::size_t panel_bytes = static_cast<std::size_t>(kPanelRows * rows.cols) * elem;
    std::memset(dst + packed.bytes_ - panel_bytes, 0, panel_bytes);
  }
  const auto* src = static_cast<const std::byte*>(rows.data);
  packed.view_ = rows;
  packed.view_.data = dst;
  packed.view_.layout = WeightLayout::kPanels;
  switch (elem) {
    case 1: Scatter<std::uint8_t>(src, rows.rows, rows.cols, dst); break;
    case 2: Scatter<std::uint16_t>(src, rows.rows, rows.cols, dst); break;
    default: Scatter<std::uint32_t>(src, rows.rows, rows.cols, dst); break;
  }
  return packed;
}

}  // namespace tandem::kernels
