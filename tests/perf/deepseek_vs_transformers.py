#!/usr/bin/env python3
"""Decode speed on the tiny DeepSeek-V3 fixture: tandem's engine kernels vs transformers' eager
CPU generation, same machine, same thread count, one run. Prints tokens/s of both, the ratio and
the peak RSS of each.

    /path/to/venv-with-torch/bin/python tests/perf/deepseek_vs_transformers.py \
        [--model tests/fixtures/deepseek_v3_tiny] [--steps 32] [--bench build/tests/perf/tandem_decode_bench]

Needs torch + transformers (not part of CI: CI's runs stay torch-free). tandem's figure comes
from tandem_decode_bench (fast backend, batch 1, all cores); transformers runs with
torch.set_num_threads(os.cpu_count()) to match.
"""
import argparse
import os
import pathlib
import re
import resource
import subprocess
import time

REPO = pathlib.Path(__file__).resolve().parents[2]


def transformers_tokens_per_second(model_dir, steps, repeats):
    import torch
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(os.cpu_count())
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32,
                                                 attn_implementation="eager")
    model.eval()
    prompt = torch.tensor([[3, 5]])  # two prompt tokens, as tandem_decode_bench uses
    best = 0.0
    with torch.inference_mode():
        for _ in range(repeats):
            start = time.perf_counter()
            out = model.generate(prompt, max_new_tokens=steps, min_new_tokens=steps,
                                 do_sample=False, use_cache=True, pad_token_id=0)
            elapsed = time.perf_counter() - start
            assert out.shape[1] == prompt.shape[1] + steps
            best = max(best, steps / elapsed)
    return best, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def tandem_tokens_per_second(bench, model_dir, steps, repeats):
    out = subprocess.run([str(bench), str(model_dir), str(steps), str(repeats)], check=True,
                         capture_output=True, text=True).stdout
    tps = float(re.search(r"^fast\s+1\s+(\d+)", out, re.M).group(1))
    rss = float(re.search(r"peak RSS: ([\d.]+) MiB", out).group(1))
    return tps, rss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=REPO / "tests/fixtures/deepseek_v3_tiny")
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--bench", default=REPO / "build/tests/perf/tandem_decode_bench")
    args = ap.parse_args()
    ours, ours_rss = tandem_tokens_per_second(args.bench, args.model, args.steps, args.repeats)
    theirs, theirs_rss = transformers_tokens_per_second(args.model, args.steps, args.repeats)
    print(f"model {args.model}, batch 1, {args.steps} decode steps, {os.cpu_count()} threads")
    print(f"tandem        {ours:12.0f} tok/s   peak RSS {ours_rss:8.1f} MiB")
    print(f"transformers  {theirs:12.0f} tok/s   peak RSS {theirs_rss:8.1f} MiB (incl. torch)")
    print(f"ratio tandem/transformers: {ours / theirs:.1f}x")


if __name__ == "__main__":
    main()
