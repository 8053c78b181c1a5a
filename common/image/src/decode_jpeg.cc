// JPEG through libjpeg(-turbo), configured as OpenCV's decoder: ISLOW DCT, fancy upsampling,
// grey replicated to RGB, CMYK/YCCK converted with OpenCV's formula. Unlike libjpeg's stock
// memory source, running out of data is a failure (OpenCV refuses truncated files).
#include <csetjmp>
#include <cstdio>

#include "decode.h"
#include "tandem/image/errors.h"

extern "C" {
#include <jpeglib.h>
#include <jerror.h>
}

namespace tandem::image::internal {
namespace {

struct ErrorManager {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
};

[[noreturn]] void OnError(j_common_ptr cinfo) {
  std::longjmp(reinterpret_cast<ErrorManager*>(cinfo->err)->jump, 1);
}

void OnMessage(j_common_ptr cinfo, int level) {
  // Warnings are ignored (as OpenCV does), except the one that means the data ended early.
  if (level == -1 && cinfo->err->msg_code == JWRN_JPEG_EOF) OnError(cinfo);
}

void InitSource(j_decompress_ptr) {}
boolean FillInput(j_decompress_ptr cinfo) {
  // No more bytes: libjpeg's memory source would invent an EOI and return a grey-filled image.
  cinfo->err->msg_code = JWRN_JPEG_EOF;
  OnError(reinterpret_cast<j_common_ptr>(cinfo));
}
void SkipInput(j_decompress_ptr cinfo, long count) {
  jpeg_source_mgr* src = cinfo->src;
  if (count <= 0) return;
  if (static_cast<std::size_t>(count) > src->bytes_in_buffer) FillInput(cinfo);
  src->next_input_byte += count;
  src->bytes_in_buffer -= static_cast<std::size_t>(count);
}
void TermSource(j_decompress_ptr) {}

// All locals that must survive a longjmp live in this struct, outside the setjmp frame.
// A progressive file can repeat scans without end, each costing a pass over the whole image;
// libjpeg-turbo's own tools stop at this many.
constexpr int kMaxScans = 500;

void OnProgress(j_common_ptr cinfo) {
  auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (d->input_scan_number > kMaxScans) OnError(cinfo);
}

struct JpegState {
  jpeg_decompress_struct cinfo{};
  ErrorManager err{};
  jpeg_source_mgr src{};
  jpeg_progress_mgr progress{};
  Bitmap out;
  std::vector<std::uint8_t> row;
  ~JpegState() { jpeg_destroy_decompress(&cinfo); }
};

bool Decode(JpegState& s, absl::string_view bytes, const DecodeLimits& limits) {
  if (setjmp(s.err.jump)) return false;
  jpeg_create_decompress(&s.cinfo);
  s.src.init_source = InitSource;
  s.src.fill_input_buffer = FillInput;
  s.src.skip_input_data = SkipInput;
  s.src.resync_to_restart = jpeg_resync_to_restart;
  s.src.term_source = TermSource;
  s.src.next_input_byte = reinterpret_cast<const JOCTET*>(bytes.data());
  s.src.bytes_in_buffer = bytes.size();
  s.cinfo.src = &s.src;
  s.progress.progress_monitor = OnProgress;
  s.cinfo.progress = &s.progress;
  if (jpeg_read_header(&s.cinfo, TRUE) != JPEG_HEADER_OK) return false;
  if (s.cinfo.image_width > limits.max_width || s.cinfo.image_height > limits.max_height ||
      s.cinfo.image_width == 0 || s.cinfo.image_height == 0) {
    return false;
  }
  const bool cmyk = s.cinfo.num_components == 4;
  s.cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  s.cinfo.dct_method = JDCT_ISLOW;
  jpeg_start_decompress(&s.cinfo);
  const int w = static_cast<int>(s.cinfo.output_width);
  const int h = static_cast<int>(s.cinfo.output_height);
  const int in_channels = s.cinfo.output_components;
  s.out.width = w;
  s.out.height = h;
  s.out.channels = 3;
  // Grown row by row (see decode_png.cc); libjpeg's own buffers are a few rows, except a
  // progressive file's coefficients, which it sizes from the (checked) header.
  const std::size_t row_bytes = static_cast<std::size_t>(w) * 3;
  s.row.resize(static_cast<std::size_t>(w) * in_channels);
  while (s.cinfo.output_scanline < s.cinfo.output_height) {
    JSAMPROW rows[1] = {s.row.data()};
    if (jpeg_read_scanlines(&s.cinfo, rows, 1) != 1) return false;
    s.out.pixels.resize(s.out.pixels.size() + row_bytes);
    std::uint8_t* dst = s.out.pixels.data() + s.out.pixels.size() - row_bytes;
    const std::uint8_t* src = s.row.data();
    for (int x = 0; x < w; ++x, dst += 3, src += in_channels) {
      if (in_channels == 4) {
        // OpenCV's icvCvt_CMYK2BGR: libjpeg hands back Adobe's inverted CMYK.
        const int k = src[3];
        dst[0] = static_cast<std::uint8_t>(k - ((255 - src[0]) * k >> 8));
        dst[1] = static_cast<std::uint8_t>(k - ((255 - src[1]) * k >> 8));
        dst[2] = static_cast<std::uint8_t>(k - ((255 - src[2]) * k >> 8));
      } else if (in_channels == 1) {
        dst[0] = dst[1] = dst[2] = src[0];
      } else {
        dst[0] = src[0];
        dst[1] = src[1];
        dst[2] = src[2];
      }
    }
  }
  jpeg_finish_decompress(&s.cinfo);
  return true;
}

}  // namespace

absl::StatusOr<Bitmap> DecodeJpeg(absl::string_view bytes, const DecodeLimits& limits) {
  JpegState state;
  state.cinfo.err = jpeg_std_error(&state.err.pub);
  state.err.pub.error_exit = OnError;
  state.err.pub.emit_message = OnMessage;
  if (!Decode(state, bytes, limits)) return ImageError(ImageErrorKind::kEmptyImage);
  return std::move(state.out);
}

}  // namespace tandem::image::internal
