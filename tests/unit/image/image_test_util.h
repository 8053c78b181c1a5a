#pragma once

// Small encoders for the image tests: each builds a valid file of the given size from a pixel
// function, so the tests can also build broken ones from it (truncate, corrupt, lie in the header).

#include <gif_lib.h>
#include <png.h>
#include <webp/encode.h>
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

extern "C" {
#include <jpeglib.h>
}

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tandem/image/errors.h"

namespace tandem::image::testing {

// (x, y, channel) -> sample.
using PixelFn = std::function<int(int, int, int)>;

inline int Pattern(int x, int y, int c) { return (x * 37 + y * 11 + c * 80) % 256; }

inline void AppendBe32(std::string& s, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) s.push_back(static_cast<char>((v >> shift) & 0xff));
}

inline void AppendChunk(std::string& png, const char* type, const std::string& data) {
  AppendBe32(png, static_cast<std::uint32_t>(data.size()));
  const std::string typed = std::string(type, 4) + data;
  png += typed;
  AppendBe32(png, static_cast<std::uint32_t>(
                      crc32(0, reinterpret_cast<const Bytef*>(typed.data()), typed.size())));
}

// colour_type: 0 grey, 2 RGB, 4 grey+alpha, 6 RGBA; bit_depth 8 or 16. `idat` overrides the
// image data (for files whose header lies about it).
inline std::string Png(std::uint32_t w, std::uint32_t h, int colour_type = 2, int bit_depth = 8,
                       const PixelFn& px = Pattern, const std::string* idat = nullptr) {
  const int channels = colour_type == 0 ? 1 : colour_type == 2 ? 3 : colour_type == 4 ? 2 : 4;
  std::string png = "\x89PNG\r\n\x1a\n";
  std::string ihdr;
  AppendBe32(ihdr, w);
  AppendBe32(ihdr, h);
  ihdr += {static_cast<char>(bit_depth), static_cast<char>(colour_type), 0, 0, 0};
  AppendChunk(png, "IHDR", ihdr);
  std::string data;
  if (idat != nullptr) {
    data = *idat;
  } else {
    std::string raw;
    for (std::uint32_t y = 0; y < h; ++y) {
      raw.push_back(0);
      for (std::uint32_t x = 0; x < w; ++x) {
        for (int c = 0; c < channels; ++c) {
          const int v = px(static_cast<int>(x), static_cast<int>(y), c);
          if (bit_depth == 16) raw.push_back(static_cast<char>(v));  // high byte = low byte
          raw.push_back(static_cast<char>(v));
        }
      }
    }
    uLongf size = compressBound(raw.size());
    data.resize(size);
    compress(reinterpret_cast<Bytef*>(data.data()), &size,
             reinterpret_cast<const Bytef*>(raw.data()), raw.size());
    data.resize(size);
  }
  AppendChunk(png, "IDAT", data);
  AppendChunk(png, "IEND", "");
  return png;
}

// components: 1 grey, 3 RGB, 4 CMYK (Adobe-style inverted samples).
inline std::string Jpeg(int w, int h, int components = 3, bool progressive = false,
                        const PixelFn& px = Pattern) {
  jpeg_compress_struct cinfo;
  jpeg_error_mgr err;
  cinfo.err = jpeg_std_error(&err);
  jpeg_create_compress(&cinfo);
  unsigned char* out = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &out, &size);
  cinfo.image_width = static_cast<JDIMENSION>(w);
  cinfo.image_height = static_cast<JDIMENSION>(h);
  cinfo.input_components = components;
  cinfo.in_color_space = components == 1 ? JCS_GRAYSCALE : components == 3 ? JCS_RGB : JCS_CMYK;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, 90, TRUE);
  if (progressive) jpeg_simple_progression(&cinfo);
  jpeg_start_compress(&cinfo, TRUE);
  std::vector<unsigned char> row(static_cast<std::size_t>(w) * components);
  while (cinfo.next_scanline < cinfo.image_height) {
    for (int x = 0; x < w; ++x) {
      for (int c = 0; c < components; ++c) {
        row[static_cast<std::size_t>(x) * components + c] =
            static_cast<unsigned char>(px(x, static_cast<int>(cinfo.next_scanline), c));
      }
    }
    JSAMPROW rows[1] = {row.data()};
    jpeg_write_scanlines(&cinfo, rows, 1);
  }
  jpeg_finish_compress(&cinfo);
  std::string jpeg(reinterpret_cast<char*>(out), size);
  jpeg_destroy_compress(&cinfo);
  std::free(out);
  return jpeg;
}

inline std::string Webp(int w, int h, bool alpha = false, bool lossless = false,
                        const PixelFn& px = Pattern) {
  const int channels = alpha ? 4 : 3;
  std::vector<std::uint8_t> pixels(static_cast<std::size_t>(w) * h * channels);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      for (int c = 0; c < channels; ++c) {
        pixels[(static_cast<std::size_t>(y) * w + x) * channels + c] =
            static_cast<std::uint8_t>(px(x, y, c));
      }
    }
  }
  std::uint8_t* out = nullptr;
  std::size_t size = 0;
  if (lossless) {
    size = alpha ? WebPEncodeLosslessRGBA(pixels.data(), w, h, w * 4, &out)
                 : WebPEncodeLosslessRGB(pixels.data(), w, h, w * 3, &out);
  } else {
    size = alpha ? WebPEncodeRGBA(pixels.data(), w, h, w * 4, 90, &out)
                 : WebPEncodeRGB(pixels.data(), w, h, w * 3, 90, &out);
  }
  std::string webp(reinterpret_cast<char*>(out), size);
  WebPFree(out);
  return webp;
}

inline int GifWrite(GifFileType* gif, const GifByteType* data, int n) {
  static_cast<std::string*>(gif->UserData)->append(reinterpret_cast<const char*>(data), n);
  return n;
}

// A GIF of `frames` frames of a 4-colour palette; frame f paints colour (f % 4); index
// `transparent` (if >= 0) is transparent in the first frame.
inline std::string Gif(int w, int h, int frames = 1, int transparent = -1) {
  std::string out;
  int error = 0;
  GifFileType* gif = EGifOpen(&out, GifWrite, &error);
  GifColorType colours[4] = {{255, 0, 0}, {0, 255, 0}, {0, 0, 255}, {10, 20, 30}};
  ColorMapObject* map = GifMakeMapObject(4, colours);
  EGifPutScreenDesc(gif, w, h, 2, 0, map);
  for (int f = 0; f < frames; ++f) {
    if (f == 0 && transparent >= 0) {
      GifByteType gce[4] = {0x01, 0, 0, static_cast<GifByteType>(transparent)};
      EGifPutExtension(gif, GRAPHICS_EXT_FUNC_CODE, 4, gce);
    }
    EGifPutImageDesc(gif, 0, 0, w, h, false, nullptr);
    std::vector<GifPixelType> line(static_cast<std::size_t>(w), static_cast<GifPixelType>(f % 4));
    for (int y = 0; y < h; ++y) EGifPutLine(gif, line.data(), w);
  }
  EGifCloseFile(gif, &error);
  GifFreeMapObject(map);
  return out;
}

inline void ExpectImageError(const absl::Status& status, ImageErrorKind kind) {
  ASSERT_FALSE(status.ok());
  const std::optional<ImageErrorKind> got = GetImageErrorKind(status);
  ASSERT_TRUE(got.has_value()) << status;
  EXPECT_EQ(ImageErrorKindName(*got), ImageErrorKindName(kind)) << status;
}

// Refused as recipe refuses unreadable files: its one generic message, a decode-class kind.
inline void ExpectUnreadable(const absl::Status& status) {
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.message(), kUnsupportedImageMessage);
  const std::optional<ImageErrorKind> kind = GetImageErrorKind(status);
  ASSERT_TRUE(kind.has_value()) << status;
  EXPECT_TRUE(*kind == ImageErrorKind::kDecode || *kind == ImageErrorKind::kEmptyImage ||
              *kind == ImageErrorKind::kUnsupportedMediaType)
      << status;
}

}  // namespace tandem::image::testing
