#include "tandem/kernels/panels.h"

#include <cstdint>
#include <cstring>
#include <new>
#include <stdexcept>

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

// Element (r, c) goes where WeightView::Index puts it, with row group g at to + g x group_stride
// (a matrix packed alone has its groups back to back; a gated pair's are interleaved); the padding
// stays zero, so that padded products are 0 x 0 and every sum stays finite. Whole column pairs
// move as one 32-bit word: within a row group, pair p of every row sits in tile row p (the blocks
// of 16 pairs follow each other), 16 pairs apart, so a large checkpoint packs at memory speed
// rather than an index computation per element. An odd last column is the low half of its pair.
void ScatterTiles(const std::uint16_t* from, std::int64_t rows, std::int64_t cols,
                  std::int64_t group_stride, std::uint16_t* to) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::uint16_t* row = from + r * cols;
    std::uint16_t* group = to + r / kTileGroupRows * group_stride + r % kTileGroupRows * 2;
    for (std::int64_t p = 0; p < cols / 2; ++p) {
      std::memcpy(group + p * 2 * kTileGroupRows, row + 2 * p, 2 * sizeof(std::uint16_t));
    }
    if (cols % 2 != 0) group[cols / 2 * 2 * kTileGroupRows] = row[cols - 1];
  }
}

// bf16 elements of one packed row group of a matrix with `cols` columns.
std::int64_t TileGroupElems(std::int64_t cols) {
  return (cols + kTileChunkCols - 1) / kTileChunkCols * kTileGroupRows * kTileChunkCols;
}

std::int64_t TileGroups(std::int64_t rows) { return (rows + kTileGroupRows - 1) / kTileGroupRows; }

}  // namespace

void PanelWeight::FreeAligned::operator()(std::byte* p) const {
  ::operator delete[](p, kPanelAlign);
}

PanelWeight PanelWeight::ZeroTiles(const WeightView& like, std::int64_t rows, std::int64_t groups) {
  PanelWeight packed;
  packed.bytes_ =
      static_cast<std::size_t>(groups * TileGroupElems(like.cols)) * sizeof(std::uint16_t);
  packed.storage_.reset(static_cast<std::byte*>(::operator new[](packed.bytes_, kPanelAlign)));
  std::memset(packed.storage_.get(), 0, packed.bytes_);
  packed.view_ = like;
  packed.view_.data = packed.storage_.get();
  packed.view_.layout = WeightLayout::kBf16Tiles;
  packed.view_.rows = rows;
  return packed;
}

std::uint16_t* PanelWeight::tiles() { return reinterpret_cast<std::uint16_t*>(storage_.get()); }

PanelWeight PanelWeight::PackGated(const WeightView& gate, const WeightView& up) {
  if (gate.dtype != DType::kBF16 || up.dtype != DType::kBF16 || gate.rows != up.rows ||
      gate.cols != up.cols || gate.layout != WeightLayout::kRows ||
      up.layout != WeightLayout::kRows) {
    throw std::invalid_argument("a gated pair is two row-major bf16 matrices of one shape");
  }
  const std::int64_t groups = TileGroups(gate.rows), group_elems = TileGroupElems(gate.cols);
  PanelWeight packed = ZeroTiles(gate, 2 * groups * kTileGroupRows, 2 * groups);
  ScatterTiles(static_cast<const std::uint16_t*>(gate.data), gate.rows, gate.cols, 2 * group_elems,
               packed.tiles());
  ScatterTiles(static_cast<const std::uint16_t*>(up.data), up.rows, up.cols, 2 * group_elems,
               packed.tiles() + group_elems);
  return packed;
}

PanelWeight PanelWeight::PackStacked(std::span<const WeightView> parts) {
  if (parts.empty()) throw std::invalid_argument("nothing to stack");
  std::int64_t groups = 0;
  for (const WeightView& part : parts) {
    if (part.dtype != DType::kBF16 || part.layout != WeightLayout::kRows ||
        part.cols != parts[0].cols || part.rows <= 0) {
      throw std::invalid_argument("stacked matrices are row-major bf16 with the same columns");
    }
    groups += TileGroups(part.rows);
  }
  const std::int64_t group_elems = TileGroupElems(parts[0].cols);
  PanelWeight stacked = ZeroTiles(parts[0], groups * kTileGroupRows, groups);
  std::uint16_t* to = stacked.tiles();
  for (const WeightView& part : parts) {
    ScatterTiles(static_cast<const std::uint16_t*>(part.data), part.rows, part.cols, group_elems,
                 to);
    to += TileGroups(part.rows) * group_elems;
  }
  return stacked;
}

PanelWeight PanelWeight::Pack(const WeightView& rows, WeightLayout layout) {
  PanelWeight packed;
  const std::size_t elem = DTypeSize(rows.dtype);
  if (layout == WeightLayout::kBf16Tiles) {
    if (rows.dtype != DType::kBF16) {
      throw std::invalid_argument("bf16 tiles hold bf16 weights only");
    }
    packed = ZeroTiles(rows, rows.rows, TileGroups(rows.rows));
    ScatterTiles(static_cast<const std::uint16_t*>(rows.data), rows.rows, rows.cols,
                 TileGroupElems(rows.cols), packed.tiles());
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
    case 1:
      Scatter<std::uint8_t>(src, rows.rows, rows.cols, dst);
      break;
    case 2:
      Scatter<std::uint16_t>(src, rows.rows, rows.cols, dst);
      break;
    default:
      Scatter<std::uint32_t>(src, rows.rows, rows.cols, dst);
      break;
  }
  return packed;
}

}  // namespace tandem::kernels
