"""Seeded generator of the image corpus for test_image_preprocess.py and the preprocessing bench.

    images = generate(seed=1)            # [Case(name, data, details), ...], >= 300 accepted images
    refusals = refusal_cases()           # [Case(...)], files recipe must refuse
    python tests/conformance/image_corpus.py OUT_DIR [--seed N]   # writes them as files

Every supported format (PNG, JPEG, GIF, WebP) with its variants: 8- and 16-bit PNG, grey, palette,
tRNS and alpha channels, CMYK and progressive JPEG, EXIF orientations, animated GIF and WebP
(frames that differ, so a decoder taking the wrong frame is caught), lossy and lossless WebP;
sizes from 1x1 to 2048 on a side, extreme aspect ratios, exact multiples of the low-detail limit
(OpenCV's integer-factor area path), and content with edges, gradients and noise so that the
resize arithmetic shows. Pillow is the only dependency; PNGs Pillow cannot write (16-bit colour,
tRNS on grey/RGB) are assembled by hand.
"""
import dataclasses
import io
import random
import struct
import sys
import zlib

from PIL import Image, ImageDraw

DETAILS = ("high", "low", "original", "auto")


@dataclasses.dataclass
class Case:
    name: str
    data: bytes
    details: tuple = ("high", "low")


def _content(rng, w, h, mode="RGB"):
    """A picture with a gradient, shapes with hard edges, and some noise."""
    img = Image.new("RGB", (w, h))
    gx = Image.linear_gradient("L").resize((w, h))
    base = Image.merge("RGB", (gx, gx.rotate(90).resize((w, h)), Image.new("L", (w, h), rng.randrange(256))))
    img.paste(base)
    draw = ImageDraw.Draw(img)
    for _ in range(rng.randrange(3, 15)):
        x0, y0 = rng.randrange(w), rng.randrange(h)
        x1, y1 = x0 + rng.randrange(1, max(2, w // 2)), y0 + rng.randrange(1, max(2, h // 2))
        colour = tuple(rng.randrange(256) for _ in range(3))
        if rng.random() < 0.5:
            draw.rectangle([x0, y0, x1, y1], fill=colour)
        else:
            draw.ellipse([x0, y0, x1, y1], fill=colour)
    if w * h <= 400_000:
        noise = Image.effect_noise((w, h), rng.randrange(5, 60)).convert("RGB")
        img = Image.blend(img, noise, 0.15)
    return img.convert(mode) if mode != "RGB" else img


def _alpha(rng, img):
    w, h = img.size
    mask = Image.linear_gradient("L").resize((w, h)).rotate(rng.choice((0, 90, 180, 270))).resize((w, h))
    draw = ImageDraw.Draw(mask)
    draw.rectangle([0, 0, w // 4, h // 4], fill=0)
    rgba = img.convert("RGBA")
    rgba.putalpha(mask)
    return rgba


def _save(img, fmt, **kw):
    buf = io.BytesIO()
    img.save(buf, fmt, **kw)
    return buf.getvalue()


def _chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2))


def raw_png(width, height, colour_type, bit_depth, rows, extra=(), interlace=False):
    """A PNG from raw scanlines (filter byte 0 added here), for what Pillow does not write:
    16-bit colour, tRNS on grey or RGB, Adam7 interlacing (whole-byte samples only)."""
    ihdr = struct.pack(">IIBBBBB", width, height, bit_depth, colour_type, 0, 0, 1 if interlace else 0)
    if not interlace:
        body = b"".join(b"\0" + row for row in rows)
    else:
        size = len(rows[0]) // width  # bytes per pixel
        body = b""
        for x0, y0, dx, dy in ADAM7:
            for y in range(y0, height, dy):
                line = b"".join(rows[y][x * size:(x + 1) * size] for x in range(x0, width, dx))
                if line:
                    body += b"\0" + line
    chunks = [_chunk(b"IHDR", ihdr)] + [_chunk(k, d) for k, d in extra]
    chunks += [_chunk(b"IDAT", zlib.compress(body)), _chunk(b"IEND", b"")]
    return b"\x89PNG\r\n\x1a\n" + b"".join(chunks)


def _png_interlaced(rng, w, h, channels, bit_depth):
    rows = []
    for y in range(h):
        row = bytearray()
        for x in range(w):
            for c in range(channels):
                v = (x * 5 + y * 3 + c * 70 + rng.randrange(8)) % 256
                row += bytes([v, v]) if bit_depth == 16 else bytes([v])
        rows.append(bytes(row))
    return raw_png(w, h, {1: 0, 2: 4, 3: 2, 4: 6}[channels], bit_depth, rows, interlace=True)


def _gif_placed(rng, screen, frame, offset):
    """A GIF whose first frame is smaller than, offset in, or beyond its logical screen."""
    data = bytearray(_save(_content(rng, *frame).convert("P", palette=Image.Palette.ADAPTIVE), "GIF"))
    data[6:10] = struct.pack("<HH", *screen)
    flags = data[10]
    pos = 13 + (3 * 2 ** ((flags & 7) + 1) if flags & 0x80 else 0)
    while data[pos] != 0x2C:  # skip extensions up to the image descriptor
        pos += 2
        while data[pos]:
            pos += data[pos] + 1
        pos += 1
    data[pos + 1:pos + 5] = struct.pack("<HH", *offset)
    return bytes(data)


def _png16(rng, w, h, channels):
    colour_type = {1: 0, 3: 2, 4: 6, 2: 4}[channels]
    rows = []
    for y in range(h):
        row = bytearray()
        for x in range(w):
            for c in range(channels):
                v = (x * 65535 // max(1, w - 1) + y * 977 + c * 20000 + rng.randrange(300)) % 65536
                row += struct.pack(">H", v)
        rows.append(bytes(row))
    return raw_png(w, h, colour_type, 16, rows)


def _png_trns(rng, w, h, grey):
    """tRNS on a grey or RGB image: OpenCV honours it for RGB only."""
    key = rng.randrange(256)
    rows = []
    for y in range(h):
        row = bytearray()
        for x in range(w):
            v = key if (x // 4 + y // 4) % 2 else (x * 7 + y * 3) % 256
            row += bytes([v]) if grey else bytes([v, (v * 3) % 256, key if v == key else 255 - v])
        rows.append(bytes(row))
    trns = struct.pack(">H", key) if grey else struct.pack(">HHH", key, (key * 3) % 256, key)
    return raw_png(w, h, 0 if grey else 2, 8, rows, extra=[(b"tRNS", trns)])


def _exif(orientation):
    exif = Image.Exif()
    exif[0x0112] = orientation
    return exif.tobytes()


def _frames(rng, w, h, n=3):
    return [_content(random.Random(rng.random()), w, h) for _ in range(n)]


def _size(rng):
    kind = rng.random()
    if kind < 0.15:
        return rng.randrange(1, 64), rng.randrange(1, 64)
    if kind < 0.25:  # extreme aspect ratios
        long_side, short_side = rng.randrange(300, 2049), rng.randrange(1, 12)
        return (long_side, short_side) if rng.random() < 0.5 else (short_side, long_side)
    if kind < 0.35:  # integer multiples of the low-detail limit
        f = rng.choice((1, 2, 3, 4))
        return 512 * f // rng.choice((1, 2)), 512 * f // rng.choice((1, 2, 4))
    return rng.randrange(16, 2049), rng.randrange(16, 2049)


def _small(size, limit=900):
    w, h = size
    s = min(1.0, limit / max(w, h))
    return max(1, int(w * s)), max(1, int(h * s))


def generate(seed=1):
    rng = random.Random(seed)
    cases = []

    def add(name, data, details=("high", "low")):
        cases.append(Case(f"{len(cases):03d}-{name}", data, details))

    fixed = [(1, 1), (1, 2048), (2048, 1), (2048, 2048), (2, 165), (165, 2), (544, 544), (545, 543),
             (1024, 768), (1536, 1024), (1920, 1080), (1080, 1920), (640, 480), (16, 2000),
             (2000, 16), (1302, 1302), (42, 42), (3, 2048)]
    for w, h in fixed:
        add(f"png-rgb-{w}x{h}", _save(_content(rng, w, h), "PNG"), DETAILS)
    for i in range(85):
        w, h = _size(rng)
        mode = rng.choice(("RGB", "RGB", "L", "RGBA", "LA", "P", "1"))
        img = _content(rng, w, h)
        if mode in ("RGBA", "LA"):
            img = _alpha(rng, img).convert(mode)
        elif mode == "P":
            img = img.convert("P", palette=Image.Palette.ADAPTIVE, colors=rng.choice((4, 16, 256)))
            if rng.random() < 0.5:
                img.info["transparency"] = rng.randrange(4)
        else:
            img = img.convert(mode)
        add(f"png-{mode}-{w}x{h}", _save(img, "PNG", compress_level=rng.choice((0, 1, 6))))
    for i in range(12):
        w, h = _small(_size(rng), 300)
        add(f"png16-{i}-{w}x{h}", _png16(rng, w, h, rng.choice((1, 2, 3, 4))))
    for i in range(8):
        w, h = _small(_size(rng), 300)
        add(f"png-interlaced-{i}-{w}x{h}", _png_interlaced(rng, w, h, 1 + i % 4, 16 if i % 3 == 0 else 8))
    for screen, frame, offset in (((50, 40), (30, 20), (5, 7)), ((40, 30), (30, 20), (20, 20)),
                                  ((10, 10), (30, 20), (0, 0)), ((700, 300), (200, 100), (450, 150))):
        add(f"gif-placed-{screen[0]}x{screen[1]}", _gif_placed(rng, screen, frame, offset))
    for i in range(8):
        w, h = _small(_size(rng), 400)
        add(f"png-trns-{'grey' if i % 2 else 'rgb'}-{w}x{h}", _png_trns(rng, w, h, grey=i % 2 == 1))
    for i in range(70):
        w, h = _size(rng)
        mode = rng.choice(("RGB", "RGB", "L", "CMYK"))
        img = _content(rng, w, h, mode)
        kw = {"quality": rng.choice((40, 75, 90, 100))}
        if mode == "RGB":
            kw["subsampling"] = rng.choice((0, 1, 2))
        if rng.random() < 0.3:
            kw["progressive"] = True
        if rng.random() < 0.3:
            kw["exif"] = _exif(rng.randrange(1, 9))
        add(f"jpeg-{mode}-{w}x{h}", _save(img, "JPEG", **kw))
    for orientation in range(1, 9):
        w, h = 300 + orientation * 10, 200
        add(f"jpeg-exif{orientation}-{w}x{h}",
            _save(_content(rng, w, h), "JPEG", exif=_exif(orientation)))
    for i in range(45):
        w, h = _small(_size(rng))
        if i % 3 == 0:
            frames = [f.convert("P", palette=Image.Palette.ADAPTIVE) for f in _frames(rng, w, h)]
            data = _save(frames[0], "GIF", save_all=True, append_images=frames[1:], duration=50,
                         loop=0, disposal=rng.choice((0, 1, 2)))
            add(f"gif-anim-{w}x{h}", data)
        elif i % 3 == 1:
            img = _content(rng, w, h).convert("P", palette=Image.Palette.ADAPTIVE, colors=64)
            add(f"gif-trns-{w}x{h}", _save(img, "GIF", transparency=rng.randrange(64),
                                           interlace=rng.random() < 0.5))
        else:
            add(f"gif-{w}x{h}", _save(_content(rng, w, h), "GIF", interlace=rng.random() < 0.5))
    for i in range(60):
        w, h = _small(_size(rng), 1600)
        kind = i % 4
        if kind == 0:
            add(f"webp-lossy-{w}x{h}", _save(_content(rng, w, h), "WEBP", quality=rng.randrange(30, 100)))
        elif kind == 1:
            add(f"webp-lossless-{w}x{h}", _save(_content(rng, w, h), "WEBP", lossless=True))
        elif kind == 2:
            add(f"webp-alpha-{w}x{h}", _save(_alpha(rng, _content(rng, w, h)), "WEBP",
                                             lossless=rng.random() < 0.5))
        else:
            w, h = _small((w, h), 500)
            frames = _frames(rng, w, h)
            add(f"webp-anim-{w}x{h}", _save(frames[0], "WEBP", save_all=True,
                                            append_images=frames[1:], duration=50))
    return cases


def _png_header_only(width, height):
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", zlib.compress(b"\0" * 1000)) + _chunk(b"IEND", b"")


def refusal_cases(seed=2):
    """Files recipe refuses: no bytes, other formats, broken or truncated files, bombs, too large."""
    rng = random.Random(seed)
    png = _save(_content(rng, 64, 48), "PNG")
    jpeg = _save(_content(rng, 64, 48), "JPEG")
    gif = _save(_content(rng, 64, 48), "GIF")
    webp = _save(_content(rng, 64, 48), "WEBP")
    cases = [
        ("empty", b""),
        ("text", b"hello, this is not an image"),
        ("bmp", _save(_content(rng, 8, 8), "BMP")),
        ("tiff", _save(_content(rng, 8, 8), "TIFF")),
        ("ico", _save(_content(rng, 16, 16), "ICO")),
        ("png-bomb-100000", _png_header_only(100000, 100000)),
        ("png-bomb-2049", _png_header_only(2049, 10)),
        ("png-header-only-2000", _png_header_only(2000, 2000)),
        ("png-too-wide", _save(_content(rng, 2049, 4), "PNG")),
        ("jpeg-too-tall", _save(_content(rng, 4, 2100), "JPEG")),
        ("gif-too-wide", _save(_content(rng, 2100, 3), "GIF")),
        ("webp-too-wide", _save(_content(rng, 2100, 3), "WEBP", lossless=True)),
        ("png-signature-only", png[:8]),
        ("jpeg-soi-only", jpeg[:3]),
        ("gif-magic-only", b"GIF"),
        ("webp-riff-only", webp[:12]),
    ]
    for name, data in (("png", png), ("jpeg", jpeg), ("gif", gif), ("webp", webp)):
        for cut in (0.1, 0.5, 0.9):
            cases.append((f"{name}-truncated-{int(cut * 100)}", data[: int(len(data) * cut)]))
    broken = bytearray(png)
    broken[40:60] = bytes(20)
    cases.append(("png-corrupt-idat", bytes(broken)))
    broken = bytearray(png)
    broken[29] ^= 0xFF  # IHDR CRC
    cases.append(("png-bad-ihdr-crc", bytes(broken)))
    return [Case(f"refuse-{name}", data, ("high",)) for name, data in cases]


def main(argv):
    import pathlib

    out = pathlib.Path(argv[1])
    seed = int(argv[argv.index("--seed") + 1]) if "--seed" in argv else 1
    out.mkdir(parents=True, exist_ok=True)
    for case in generate(seed) + refusal_cases():
        (out / f"{case.name}.img").write_bytes(case.data)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
