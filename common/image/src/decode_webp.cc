// WebP through libwebp, as OpenCV decodes it: still images with or without alpha, and the first
// frame of an animation composed on its (transparent) canvas by the demuxer.
#include <webp/decode.h>
#include <webp/demux.h>

#include <cstring>

#include "decode.h"
#include "tandem/image/errors.h"

namespace tandem::image::internal {
namespace {

absl::Status Fail() { return ImageError(ImageErrorKind::kEmptyImage); }

absl::StatusOr<Bitmap> FirstFrame(absl::string_view bytes, const DecodeLimits& limits) {
  WebPData data{reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()};
  WebPAnimDecoderOptions options;
  if (!WebPAnimDecoderOptionsInit(&options)) return Fail();
  options.color_mode = MODE_RGBA;
  options.use_threads = 0;
  // The demuxer reads the canvas size first: refuse before it allocates the canvas.
  WebPDemuxer* demux = WebPDemux(&data);
  if (demux == nullptr) return Fail();
  const std::uint32_t cw = WebPDemuxGetI(demux, WEBP_FF_CANVAS_WIDTH);
  const std::uint32_t ch = WebPDemuxGetI(demux, WEBP_FF_CANVAS_HEIGHT);
  WebPDemuxDelete(demux);
  if (cw == 0 || ch == 0 || cw > limits.max_width || ch > limits.max_height) return Fail();
  WebPAnimDecoder* decoder = WebPAnimDecoderNew(&data, &options);
  if (decoder == nullptr) return Fail();
  std::uint8_t* frame = nullptr;
  int timestamp = 0;
  Bitmap out;
  if (WebPAnimDecoderGetNext(decoder, &frame, &timestamp) && frame != nullptr) {
    out.width = static_cast<int>(cw);
    out.height = static_cast<int>(ch);
    out.channels = 4;
    out.pixels.assign(frame, frame + static_cast<std::size_t>(cw) * ch * 4);
  }
  WebPAnimDecoderDelete(decoder);
  if (out.pixels.empty()) return Fail();
  return out;
}

}  // namespace

absl::StatusOr<Bitmap> DecodeWebp(absl::string_view bytes, const DecodeLimits& limits) {
  const auto* data = reinterpret_cast<const std::uint8_t*>(bytes.data());
  WebPBitstreamFeatures f;
  if (WebPGetFeatures(data, bytes.size(), &f) != VP8_STATUS_OK) return Fail();
  if (f.width <= 0 || f.height <= 0 || static_cast<std::uint32_t>(f.width) > limits.max_width ||
      static_cast<std::uint32_t>(f.height) > limits.max_height) {
    return Fail();
  }
  if (f.has_animation) return FirstFrame(bytes, limits);
  Bitmap out;
  out.width = f.width;
  out.height = f.height;
  out.channels = f.has_alpha ? 4 : 3;
  const std::size_t stride = static_cast<std::size_t>(f.width) * out.channels;
  out.pixels.resize(stride * f.height);
  const std::uint8_t* ok =
      f.has_alpha
          ? WebPDecodeRGBAInto(data, bytes.size(), out.pixels.data(), out.pixels.size(),
                               static_cast<int>(stride))
          : WebPDecodeRGBInto(data, bytes.size(), out.pixels.data(), out.pixels.size(),
                              static_cast<int>(stride));
  if (ok == nullptr) return Fail();
  return out;
}

}  // namespace tandem::image::internal
