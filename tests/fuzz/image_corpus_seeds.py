#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_image_decode into tests/fuzz/corpus/image_decode/ (deterministic).

Small files of every format and variant the decoders handle (PNG 8/16-bit, grey, palette, alpha,
interlaced; JPEG baseline, progressive, grey, CMYK; GIF static, animated, transparent, interlaced;
WebP lossy, lossless, alpha, animated) plus headers that lie about their size. Each seed starts
with the target's control byte (bit 0: low detail, bit 1: WebP round trip). Needs Pillow.
Usage: tests/fuzz/image_corpus_seeds.py [OUT_DIR]
"""
import io
import os
import random
import struct
import sys
import zlib

from PIL import Image, ImageDraw

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def picture(w, h, seed):
    rng = random.Random(seed)
    img = Image.new("RGB", (w, h), tuple(rng.randrange(256) for _ in range(3)))
    draw = ImageDraw.Draw(img)
    for _ in range(4):
        x, y = rng.randrange(w), rng.randrange(h)
        draw.rectangle([x, y, x + rng.randrange(1, w + 1), y + rng.randrange(1, h + 1)],
                       fill=tuple(rng.randrange(256) for _ in range(3)))
    return img


def save(img, fmt, **kw):
    buf = io.BytesIO()
    img.save(buf, fmt, **kw)
    return buf.getvalue()


def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png_declaring(w, h, depth=8, colour=2):
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, colour, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b""))


def seeds():
    p = picture(24, 16, 1)
    frames = [picture(20, 12, s) for s in (2, 3)]
    rgba = p.convert("RGBA")
    rgba.putalpha(Image.linear_gradient("L").resize((24, 16)))
    yield "png-rgb", save(p, "PNG")
    yield "png-rgba", save(rgba, "PNG")
    yield "png-grey", save(p.convert("L"), "PNG")
    yield "png-grey-alpha", save(rgba.convert("LA"), "PNG")
    yield "png-palette", save(p.convert("P", palette=Image.Palette.ADAPTIVE, colors=8), "PNG", transparency=2)
    yield "png-1bit", save(p.convert("1"), "PNG")
    yield "png-16bit", save(p.convert("I;16"), "PNG")
    yield "png-declares-huge", png_declaring(100000, 100000)
    yield "png-declares-1000", png_declaring(1000, 1000, 16, 6)
    yield "jpeg", save(p, "JPEG", quality=80)
    yield "jpeg-progressive", save(p, "JPEG", progressive=True)
    yield "jpeg-grey", save(p.convert("L"), "JPEG")
    yield "jpeg-cmyk", save(p.convert("CMYK"), "JPEG")
    yield "jpeg-444", save(p, "JPEG", subsampling=0)
    yield "gif", save(p, "GIF")
    yield "gif-interlaced-transparent", save(p.convert("P", palette=Image.Palette.ADAPTIVE, colors=16),
                                             "GIF", transparency=3, interlace=True)
    yield "gif-animated", save(frames[0], "GIF", save_all=True, append_images=frames[1:], disposal=2)
    yield "webp-lossy", save(p, "WEBP", quality=50)
    yield "webp-lossless", save(p, "WEBP", lossless=True)
    yield "webp-alpha", save(rgba, "WEBP")
    yield "webp-animated", save(frames[0], "WEBP", save_all=True, append_images=frames[1:])


def main(argv):
    out = argv[1] if len(argv) > 1 else os.path.join(ROOT, "tests", "fuzz", "corpus", "image_decode")
    os.makedirs(out, exist_ok=True)
    for name, data in seeds():
        for control in (0, 1, 2):
            with open(os.path.join(out, f"{name}-{control}"), "wb") as f:
                f.write(bytes([control]) + data)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
