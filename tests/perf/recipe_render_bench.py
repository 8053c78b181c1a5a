#!/usr/bin/env python3
"""Request render time, one thread: tandem's protocol layer (C++) vs deepseek-recipe (Rust, via its
Python binding), on the same Chat Completions requests.

Both take each request as JSON text and produce the prompt's token ids: parse, convert
(ChatCompletionRequest(body).convert), render for the model's encoding (V4 or V4.1), encode with
the DeepSeek-V4 tokenizer. The requests are the valid ones of the differential-test corpus
(tests/conformance/recipe_corpus.py, seeded), minus V4.1 prompts the V4 tokenizer cannot encode
(it lacks <｜System｜>). Best of REPS passes after a warm-up pass; the oracle's time includes the
Python call overhead of one convert and one encode call per request, which is what a Python server
built on it pays.

Usage: .venv/bin/python tests/perf/recipe_render_bench.py [--build build] [--reps 5]
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "conformance"))

import deepseek_recipe as dr  # noqa: E402
import recipe_cli  # noqa: E402
import recipe_corpus  # noqa: E402
from tokenizer_bench import best_of  # noqa: E402  (same directory: best of REPS after a warm-up)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("TANDEM_BUILD_DIR", str(REPO / "build")))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--count", type=int, default=1000, help="corpus size before filtering")
    args = ap.parse_args()

    bench = pathlib.Path(args.build) / "tests" / "perf" / "tandem_recipe_render_bench"
    if not bench.exists():
        sys.exit(f"{bench} is not built (ninja tandem_recipe_render_bench)")
    tokenizer_path = recipe_cli.deepseek_tokenizer_path()
    tokenizer = dr.Tokenizer.from_file(str(tokenizer_path))
    options = dr.ConversionOptions()
    encoders = {
        "v4": dr.DeepseekV4Encoding().with_tokenizer(tokenizer),
        "v41": dr.DeepseekV41Encoding().with_tokenizer(tokenizer),
    }

    def oracle_ids(text):
        request = dr.ChatCompletionRequest(text).convert(options)
        v41 = str(request.model_version).endswith("DeepseekV41Flash")
        return encoders["v41" if v41 else "v4"].encode(request.conversation)

    requests = []
    for body in recipe_corpus.chat_corpus(seed=7, count=args.count, invalid_fraction=0):
        text = json.dumps(body, ensure_ascii=False)
        try:
            oracle_ids(text)
        except (dr.ConversionError, ValueError, RuntimeError):
            continue
        requests.append(text)
    tokens = sum(len(oracle_ids(t)) for t in requests)

    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", encoding="utf-8", delete=False) as f:
        f.write("".join(t + "\n" for t in requests))
        path = f.name
    try:
        out = subprocess.run([str(bench), str(tokenizer_path), path, str(args.reps)], check=True,
                             capture_output=True, text=True).stdout.split()
    finally:
        os.unlink(path)
    fields = dict(zip(out[::2], out[1::2]))
    if int(fields["tokens"]) != tokens:
        sys.exit(f"token counts differ: tandem {fields['tokens']}, deepseek-recipe {tokens}")
    tandem_s = float(fields["tandem_s"])
    oracle_s = best_of(args.reps, lambda: [oracle_ids(t) for t in requests])
    n = len(requests)
    print(f"requests: {n} ({tokens} prompt tokens)")
    print(f"tandem:          {tandem_s * 1e6 / n:8.1f} us/request")
    print(f"deepseek-recipe: {oracle_s * 1e6 / n:8.1f} us/request")
    print(f"ratio (deepseek-recipe time / tandem time): {oracle_s / tandem_s:.2f}x")


if __name__ == "__main__":
    main()
