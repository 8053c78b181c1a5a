// PNG through libpng, with OpenCV's choices: palette expanded, tRNS honoured for colour and
// palette images but not grey ones, grey replicated to RGB, no gamma, 16-bit reduced with
// round(v / 257), the whole file read through IEND (a truncated file fails).
#include <png.h>

#include <csetjmp>
#include <cstring>

#include "decode.h"
#include "tandem/image/errors.h"

namespace tandem::image::internal {
namespace {

// Ancillary chunks (iCCP, zTXt, ...) cannot make libpng allocate more than this each.
constexpr png_alloc_size_t kMaxChunkBytes = 8u << 20;

struct Reader {
  const unsigned char* data;
  std::size_t size;
  std::size_t offset;
};

void ReadBytes(png_structp png, png_bytep out, png_size_t count) {
  auto* r = static_cast<Reader*>(png_get_io_ptr(png));
  if (count > r->size - r->offset) png_error(png, "truncated");
  std::memcpy(out, r->data + r->offset, count);
  r->offset += count;
}

void IgnoreWarning(png_structp, png_const_charp) {}
[[noreturn]] void OnError(png_structp png, png_const_charp) { png_longjmp(png, 1); }

// One decoded row onto `out`; 16-bit samples (big-endian) become round(v / 257), as OpenCV's
// convertTo(CV_8U, 1/257) gives.
void AppendRow(const std::uint8_t* row, std::size_t values, bool sixteen,
               std::vector<std::uint8_t>& out) {
  if (!sixteen) {
    out.insert(out.end(), row, row + values);
    return;
  }
  for (std::size_t i = 0; i < values; ++i, row += 2) {
    const unsigned v = (unsigned{row[0]} << 8) | row[1];
    out.push_back(static_cast<std::uint8_t>((2 * v + 257) / 514));
  }
}

struct PngState {
  png_structp png = nullptr;
  png_infop info = nullptr;
  Reader reader{};
  Bitmap out;
  std::vector<std::uint8_t> wide;  // rows as libpng writes them (16-bit before reduction)
  std::vector<png_bytep> rows;
  ~PngState() {
    if (png != nullptr) png_destroy_read_struct(&png, info != nullptr ? &info : nullptr, nullptr);
  }
};

bool Decode(PngState& s, const DecodeLimits& limits) {
  if (setjmp(png_jmpbuf(s.png))) return false;
  png_set_user_limits(s.png, limits.max_width, limits.max_height);
  png_set_chunk_malloc_max(s.png, kMaxChunkBytes);
  png_set_read_fn(s.png, &s.reader, ReadBytes);
  png_read_info(s.png, s.info);
  const png_uint_32 w = png_get_image_width(s.png, s.info);
  const png_uint_32 h = png_get_image_height(s.png, s.info);
  const int color_type = png_get_color_type(s.png, s.info);
  const int bit_depth = png_get_bit_depth(s.png, s.info);
  if (w == 0 || h == 0 || w > limits.max_width || h > limits.max_height) return false;

  const bool has_trns = png_get_valid(s.png, s.info, PNG_INFO_tRNS) != 0;
  bool alpha = (color_type & PNG_COLOR_MASK_ALPHA) != 0;
  if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(s.png);
  if ((color_type & PNG_COLOR_MASK_COLOR) == 0 && bit_depth < 8) {
    png_set_expand_gray_1_2_4_to_8(s.png);
  }
  if ((color_type & PNG_COLOR_MASK_COLOR) != 0 && has_trns) {
    png_set_tRNS_to_alpha(s.png);
    alpha = true;
  }
  if ((color_type & PNG_COLOR_MASK_COLOR) == 0) png_set_gray_to_rgb(s.png);
  png_set_interlace_handling(s.png);
  png_read_update_info(s.png, s.info);

  const int channels = alpha ? 4 : 3;
  const bool sixteen = bit_depth == 16;
  if (static_cast<int>(png_get_channels(s.png, s.info)) != channels) return false;
  s.out.width = static_cast<int>(w);
  s.out.height = static_cast<int>(h);
  s.out.channels = channels;
  const std::size_t row_values = static_cast<std::size_t>(w) * channels;
  const std::size_t row_bytes = row_values * (sixteen ? 2 : 1);
  if (png_get_interlace_type(s.png, s.info) != PNG_INTERLACE_NONE) {
    // Adam7 passes revisit every row: the whole (checked) image must be in memory.
    s.wide.resize(row_bytes * h);
    s.rows.resize(h);
    for (png_uint_32 y = 0; y < h; ++y) s.rows[y] = s.wide.data() + y * row_bytes;
    png_read_image(s.png, s.rows.data());
    for (png_uint_32 y = 0; y < h; ++y) AppendRow(s.rows[y], row_values, sixteen, s.out.pixels);
  } else {
    // Row by row, growing the output as rows arrive: a file that declares a large image but
    // carries little data costs memory in proportion to its data, not to its header.
    s.wide.resize(row_bytes);
    for (png_uint_32 y = 0; y < h; ++y) {
      png_read_row(s.png, s.wide.data(), nullptr);
      AppendRow(s.wide.data(), row_values, sixteen, s.out.pixels);
    }
  }
  png_read_end(s.png, nullptr);
  return true;
}

}  // namespace

absl::StatusOr<Bitmap> DecodePng(absl::string_view bytes, const DecodeLimits& limits) {
  PngState state;
  state.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, nullptr, OnError, IgnoreWarning);
  if (state.png == nullptr) return ImageError(ImageErrorKind::kEmptyImage);
  state.info = png_create_info_struct(state.png);
  if (state.info == nullptr) return ImageError(ImageErrorKind::kEmptyImage);
  state.reader = {reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), 0};
  if (!Decode(state, limits)) return ImageError(ImageErrorKind::kEmptyImage);
  return std::move(state.out);
}

}  // namespace tandem::image::internal
