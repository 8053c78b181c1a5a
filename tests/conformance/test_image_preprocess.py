"""Image preprocessing parity: `tandem-recipe image` (common/image) against deepseek-recipe.

For every image image_corpus.py generates (>= 300, all four formats and their variants, at each
detail level it lists) the preprocessed width, height and image_tokens
(MultiModalData([info]).image_token_adjustment() + 1) must equal recipe's
(OpenCvImagePreprocessor().preprocess(data, PreprocessOptions(detail, 2048, 512))), and the
pixels must be within 3 levels of recipe's output image (its WebP, decoded). Every file recipe
refuses must be refused with the same message. Skips when the binary, deepseek_recipe or Pillow is
missing.
"""
import collections
import io
import json
import pathlib
import subprocess

import pytest

from recipe_cli import BINARY

dr = pytest.importorskip("deepseek_recipe")
Image = pytest.importorskip("PIL.Image")
ImageChops = pytest.importorskip("PIL.ImageChops")
import image_corpus  # noqa: E402  (needs Pillow)

MAX_DIMENSION = 2048
LOW_DETAIL_MAX = 512
PIXEL_TOLERANCE = 3
# Failures whose cause differs between recipe's decoders and ours only in where it is noticed (a
# header reader versus the decoder): same message, kind within this class.
UNREADABLE = {"Decode", "EmptyImage"}

if not BINARY.exists():
    pytest.skip(f"{BINARY} not built", allow_module_level=True)


def oracle(data, detail):
    try:
        info = dr.OpenCvImagePreprocessor().preprocess(
            data, dr.PreprocessOptions(detail, MAX_DIMENSION, LOW_DETAIL_MAX))
    except dr.ImageError as e:
        return {"error": {"kind": e.kind, "message": str(e)}}
    tokens = dr.MultiModalData([info]).image_token_adjustment() + 1
    return {"width": info.width, "height": info.height, "image_tokens": tokens, "webp": info.data}


def ours(paths, detail, dump_dir):
    args = [str(BINARY), "image", "--encoding", "v4.1", "--detail", detail,
            "--max-dimension", str(MAX_DIMENSION), "--low-detail-max-dimension", str(LOW_DETAIL_MAX),
            "--dump-rgb", str(dump_dir)] + [str(p) for p in paths]
    run = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert run.returncode in (0, 1), run.stderr
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    assert len(lines) == len(paths), run.stderr
    return lines


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("images")
    cases = image_corpus.generate(seed=1) + image_corpus.refusal_cases(seed=2)
    for case in cases:
        (root / f"{case.name}.img").write_bytes(case.data)
    return root, cases


def compare_detail(root, cases, detail, tmp_path):
    selected = [c for c in cases if detail in c.details]
    dump = tmp_path / detail
    dump.mkdir()
    got = ours([root / f"{c.name}.img" for c in selected], detail, dump)
    problems = []
    accepted = 0
    for n, (case, mine) in enumerate(zip(selected, got)):
        want = oracle(case.data, detail)
        if "error" in want:
            if "error" not in mine:
                problems.append(f"{case.name}: recipe refuses ({want['error']}), tandem accepts {mine}")
                continue
            w, m = want["error"], mine["error"]
            same_kind = w["kind"] == m["kind"] or {w["kind"], m["kind"]} <= UNREADABLE
            if w["message"] != m["message"] or not same_kind:
                problems.append(f"{case.name}: refusal {m} != recipe's {w}")
            continue
        if "error" in mine:
            problems.append(f"{case.name}: tandem refuses ({mine['error']}), recipe accepts")
            continue
        size = (mine["width"], mine["height"], mine["image_tokens"])
        if size != (want["width"], want["height"], want["image_tokens"]):
            problems.append(f"{case.name}: {size} != recipe's "
                            f"{(want['width'], want['height'], want['image_tokens'])}")
            continue
        accepted += 1
        reference = Image.open(io.BytesIO(want["webp"])).convert("RGB")
        pixels = Image.frombytes("RGB", (mine["width"], mine["height"]),
                                 (dump / f"{n}.rgb").read_bytes())
        worst = max(hi for _, hi in ImageChops.difference(pixels, reference).getextrema())
        if worst > PIXEL_TOLERANCE:
            problems.append(f"{case.name}: pixels differ by up to {worst} levels")
    return accepted, problems


@pytest.mark.parametrize("detail", image_corpus.DETAILS)
def test_preprocessing_matches_recipe(corpus, detail, tmp_path):
    root, cases = corpus
    accepted, problems = compare_detail(root, cases, detail, tmp_path)
    assert not problems, "\n".join(problems[:40]) + f"\n({len(problems)} problems)"
    if detail in ("high", "low"):
        assert accepted >= 300, f"only {accepted} images compared at {detail} detail"


def test_corpus_covers_every_format_and_variant(corpus):
    _, cases = corpus
    kinds = collections.Counter(c.name.split("-")[1] for c in cases if not c.name.startswith("refuse"))
    for fmt in ("png", "png16", "jpeg", "gif", "webp"):
        assert kinds[fmt] > 0, kinds
    names = " ".join(c.name for c in cases)
    for variant in ("CMYK", "exif6", "gif-anim", "gif-placed", "png-interlaced", "webp-anim", "webp-alpha", "RGBA", "png-trns",
                    "1x2048", "2048x1", "refuse-png-bomb-100000", "refuse-empty"):
        assert variant in names, variant


def data_url_cases():
    """data: URLs in the forms clients send and the ones recipe refuses."""
    import base64
    import random
    import urllib.parse

    rng = random.Random(3)
    png = image_corpus._save(image_corpus._content(rng, 40, 30), "PNG")
    gif = image_corpus._save(image_corpus._content(rng, 20, 10), "GIF")
    b64 = base64.b64encode(png).decode()
    spaced = " ".join(b64[i:i + 60] for i in range(0, len(b64), 60))
    return [
        f"data:image/png;base64,{b64}",
        f"data:image/jpeg;base64,{b64}",             # declared type disagrees: bytes decide
        f"data:image/jpg;base64,{b64}",
        f"DATA:IMAGE/PNG;BASE64,{b64}",
        f"data:image/png;charset=x;base64,{b64}",
        f"data:image/png;base64,{b64.rstrip('=')}",   # padding optional
        f"data:image/png;base64,{spaced}",            # whitespace ignored
        f"data:image/png;base64,{b64}#fragment",
        "data:image/gif," + urllib.parse.quote_from_bytes(gif),
        "data:image/png;base64,",
        "data:image/png;base64,@@@@",
        "data:image/png;base64," + b64[:-5],
        "data:image/bmp;base64," + b64,
        "data:text/plain;base64," + b64,
        "data:;base64," + b64,
        "data:image/png" + b64,                       # no comma
        "notdata:image/png;base64," + b64,
        "data:image/png;base64," + base64.b64encode(b"not an image at all").decode(),
    ]


def test_data_urls_match_recipes_resolver(tmp_path):
    urls = data_url_cases()
    paths = []
    for n, url in enumerate(urls):
        path = tmp_path / f"{n}.txt"
        path.write_text(url)
        paths.append(path)
    run = subprocess.run([str(BINARY), "image", "--encoding", "v4.1", "--detail", "high",
                          "--data-url"] + [str(p) for p in paths],
                         capture_output=True, text=True, timeout=120)
    got = [json.loads(line) for line in run.stdout.splitlines()]
    assert len(got) == len(urls), run.stderr
    resolver = dr.ImageResolver(dr.ReqwestImageFetcher(), dr.OpenCvImagePreprocessor())
    for url, mine in zip(urls, got):
        try:
            (info,) = resolver.resolve([dr.DataUrlImageSource(url)], dr.ImageQuota()).images
            want = {"width": info.width, "height": info.height,
                    "image_tokens": dr.MultiModalData([info]).image_token_adjustment() + 1}
        except dr.ImageError as e:
            want = {"error": {"kind": e.kind, "message": str(e)}}
        if "error" in want and "error" in mine:
            assert mine["error"]["message"] == want["error"]["message"], url[:60]
            assert (mine["error"]["kind"] == want["error"]["kind"]
                    or {mine["error"]["kind"], want["error"]["kind"]} <= UNREADABLE), (url[:60], mine, want)
        else:
            assert mine == want, url[:60]
