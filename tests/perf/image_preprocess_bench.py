#!/usr/bin/env python3
"""Image preprocessing throughput, one thread: tandem's common/image (C++) vs deepseek-recipe's
OpenCvImagePreprocessor (Rust + OpenCV, via its Python binding), on the same images.

Both take each encoded image and produce the V4.1 input: decode, blend, fit the token budget,
pad, and the WebP the model server receives (recipe encodes it; tandem encodes and decodes it
back to pixels, so tandem does strictly more work), plus the token count. Images: the seeded
conformance corpus (tests/conformance/image_corpus.py, every format and variant, 1 px to 2048 px
sides). Best of REPS passes after a warm-up pass; recipe's time includes one preprocess and one
image_token_adjustment call per image. OpenCV is held to one thread (cv::setNumThreads is not
reachable through the binding: OPENCV_FOR_THREADS_NUM=1 in the environment does it).

Usage: .venv/bin/python tests/perf/image_preprocess_bench.py [--build build] [--reps 3]
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("OPENCV_FOR_THREADS_NUM", "1")
REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "conformance"))

import deepseek_recipe as dr  # noqa: E402
import image_corpus  # noqa: E402


def recipe_pass(images, detail):
    pre = dr.OpenCvImagePreprocessor()
    options = dr.PreprocessOptions(detail, 2048, 512)
    tokens = 0
    start = time.perf_counter()
    for data in images:
        info = pre.preprocess(data, options)
        tokens += dr.MultiModalData([info]).image_token_adjustment() + 1
    return time.perf_counter() - start, tokens


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("TANDEM_BUILD_DIR", str(REPO / "build")))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    bench = pathlib.Path(args.build) / "tests" / "perf" / "tandem_image_preprocess_bench"
    if not bench.exists():
        sys.exit(f"{bench} not built (ninja -C {args.build} tandem_image_preprocess_bench)")
    cases = image_corpus.generate(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for case in cases:
            path = pathlib.Path(tmp) / f"{case.name}.img"
            path.write_bytes(case.data)
            paths.append(str(path))
        for detail in ("high", "low"):
            run = subprocess.run([str(bench), "--detail", detail, "--reps", str(args.reps),
                                  "--max-dimension", "2048"] + paths,
                                 capture_output=True, text=True, check=True)
            ours = json.loads(run.stdout)
            images = [c.data for c in cases]
            recipe_pass(images, detail)  # warm-up
            best, tokens = min(recipe_pass(images, detail) for _ in range(args.reps))
            if tokens != ours["checksum"]:
                sys.exit(f"token totals differ at {detail}: recipe {tokens}, tandem {ours['checksum']}")
            theirs = len(images) / best
            print(f"{detail:>4}: {len(images)} images, tandem {ours['images_per_s']:.1f} images/s, "
                  f"deepseek-recipe {theirs:.1f} images/s, ratio {ours['images_per_s'] / theirs:.2f}x")


if __name__ == "__main__":
    main()
