// The first frame of a GIF, as the `image` crate (recipe's GIF decoder) returns it: the frame
// drawn at its offset on a transparent canvas of the logical screen's size, the transparent index
// clear, RGBA. Only the first image's records are read, one line at a time, so neither many frames
// nor a frame larger than the screen costs memory beyond the canvas.
#include <gif_lib.h>

#include <cstring>

#include "decode.h"
#include "tandem/image/errors.h"

namespace tandem::image::internal {
namespace {

struct Reader {
  const unsigned char* data;
  std::size_t size;
  std::size_t offset;
};

int ReadBytes(GifFileType* gif, GifByteType* out, int count) {
  auto* r = static_cast<Reader*>(gif->UserData);
  if (count < 0) return 0;
  const std::size_t n = std::min(static_cast<std::size_t>(count), r->size - r->offset);
  std::memcpy(out, r->data + r->offset, n);
  r->offset += n;
  return static_cast<int>(n);
}

struct GifCloser {
  GifFileType* gif = nullptr;
  ~GifCloser() {
    if (gif != nullptr) {
      int error = 0;
      DGifCloseFile(gif, &error);
    }
  }
};

absl::Status Fail() { return ImageError(ImageErrorKind::kDecode); }

// Rows of an interlaced image arrive in four passes.
std::vector<int> RowOrder(int height, bool interlaced) {
  std::vector<int> order;
  order.reserve(static_cast<std::size_t>(height));
  if (!interlaced) {
    for (int y = 0; y < height; ++y) order.push_back(y);
    return order;
  }
  static constexpr int kStart[4] = {0, 4, 2, 1};
  static constexpr int kStep[4] = {8, 8, 4, 2};
  for (int pass = 0; pass < 4; ++pass) {
    for (int y = kStart[pass]; y < height; y += kStep[pass]) order.push_back(y);
  }
  return order;
}

}  // namespace

absl::StatusOr<Bitmap> DecodeGif(absl::string_view bytes, const DecodeLimits& limits) {
  Reader reader{reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), 0};
  int error = 0;
  GifCloser closer;
  closer.gif = DGifOpen(&reader, ReadBytes, &error);
  GifFileType* gif = closer.gif;
  if (gif == nullptr) return Fail();
  const int screen_w = gif->SWidth;
  const int screen_h = gif->SHeight;
  if (screen_w <= 0 || screen_h <= 0) return ImageError(ImageErrorKind::kEmptyImage);
  if (static_cast<std::uint32_t>(screen_w) > limits.max_width ||
      static_cast<std::uint32_t>(screen_h) > limits.max_height) {
    return ImageError(ImageErrorKind::kImageDimensionsTooLarge);
  }

  int transparent = -1;
  GifRecordType record;
  do {
    if (DGifGetRecordType(gif, &record) == GIF_ERROR) return Fail();
    if (record == EXTENSION_RECORD_TYPE) {
      int code = 0;
      GifByteType* ext = nullptr;
      if (DGifGetExtension(gif, &code, &ext) == GIF_ERROR) return Fail();
      if (code == GRAPHICS_EXT_FUNC_CODE && ext != nullptr && ext[0] >= 4) {
        transparent = (ext[1] & 0x01) != 0 ? ext[4] : -1;
      }
      while (ext != nullptr) {
        if (DGifGetExtensionNext(gif, &ext) == GIF_ERROR) return Fail();
      }
    } else if (record == TERMINATE_RECORD_TYPE) {
      return Fail();  // no image at all
    }
  } while (record != IMAGE_DESC_RECORD_TYPE);
  if (DGifGetImageDesc(gif) == GIF_ERROR) return Fail();

  const GifImageDesc& desc = gif->Image;
  const ColorMapObject* map = desc.ColorMap != nullptr ? desc.ColorMap : gif->SColorMap;
  if (map == nullptr || desc.Width <= 0 || desc.Height <= 0) return Fail();

  Bitmap out;
  out.width = screen_w;
  out.height = screen_h;
  out.channels = 4;
  out.pixels.assign(static_cast<std::size_t>(screen_w) * screen_h * 4, 0);
  std::vector<GifPixelType> line(static_cast<std::size_t>(desc.Width));
  for (int row : RowOrder(desc.Height, desc.Interlace)) {
    if (DGifGetLine(gif, line.data(), desc.Width) == GIF_ERROR) return Fail();
    const int y = desc.Top + row;
    if (y < 0 || y >= screen_h) continue;
    std::uint8_t* dst = out.pixels.data() + static_cast<std::size_t>(y) * screen_w * 4;
    for (int x = 0; x < desc.Width; ++x) {
      const int cx = desc.Left + x;
      if (cx >= screen_w) break;
      const int index = line[static_cast<std::size_t>(x)];
      if (index == transparent || index >= map->ColorCount) continue;
      const GifColorType& c = map->Colors[index];
      std::uint8_t* p = dst + static_cast<std::size_t>(cx) * 4;
      p[0] = c.Red;
      p[1] = c.Green;
      p[2] = c.Blue;
      p[3] = 255;
    }
  }
  return out;
}

}  // namespace tandem::image::internal
