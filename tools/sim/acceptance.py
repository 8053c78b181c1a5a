#!/usr/bin/env python3
"""Checks routing acceptance 1 with tandem-sim: for each trace and (capacity, speedup), every
policy is replayed; tandem must have the highest hit rate (ties allowed) and a p90 TTFT at most
0.8 x the best baseline's. Prints one row per configuration, with tandem's p90 floor (the p90 no
router can beat) and whether 0.8 x the best baseline is below it (then no policy could pass).

  tools/sim/acceptance.py --sim build/tools/sim/tandem-sim --trace T.jsonl [--trace T2.jsonl]
      [--config 4096x1.5 ...] [--workers 8] [-- extra tandem-sim flags]
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path

DEFAULT_CONFIGS = ["4096x1", "4096x1.5", "4096x2", "2048x1", "2048x1.5", "2048x2"]


def replay(sim, trace, workers, capacity, speedup, extra):
    cmd = [sim, "--trace", trace, "--prefill-workers", str(workers), "--decode-workers",
           str(workers), "--capacity-blocks", capacity, "--speedup", speedup, "--policy", "all",
           *extra]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return {row["policy"]: row for row in map(json.loads, out.splitlines()) if row}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sim", required=True)
    parser.add_argument("--trace", action="append", required=True)
    parser.add_argument("--config", action="append", help="CAPACITYxSPEEDUP")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("extra", nargs="*", help="passed to tandem-sim (after --)")
    args = parser.parse_args()
    configs = args.config or DEFAULT_CONFIGS
    failures = 0
    print("trace | B x speedup | tandem hit / p90 | best baseline hit | best baseline p90 | "
          "p90 ratio | p90 floor | verdict")
    for trace in args.trace:
        for config in configs:
            capacity, _, speedup = config.partition("x")
            rows = replay(args.sim, trace, args.workers, capacity, speedup or "1", args.extra)
            ours = rows.pop("tandem")
            best_hit = max(rows.values(), key=lambda r: r["hit_rate"])
            best_p90 = min(rows.values(), key=lambda r: r["ttft_p90"])
            ratio = ours["ttft_p90"] / best_p90["ttft_p90"]
            hit_ok = ours["hit_rate"] >= best_hit["hit_rate"]
            p90_ok = ratio <= 0.8
            reachable = 0.8 * best_p90["ttft_p90"] >= ours["ttft_p90_floor"]
            verdict = "pass" if hit_ok and p90_ok else "FAIL (%s%s)" % (
                ", ".join(w for w, ok in (("hit", hit_ok), ("p90", p90_ok)) if not ok),
                "" if reachable else "; 0.8x is below the floor")
            failures += verdict != "pass"
            print("%s | %s | %.4f / %.2f | %.4f %s | %.2f %s | %.3f | %.2f | %s" % (
                Path(trace).name, config, ours["hit_rate"], ours["ttft_p90"],
                best_hit["hit_rate"], best_hit["policy"], best_p90["ttft_p90"],
                best_p90["policy"], ratio, ours["ttft_p90_floor"], verdict), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
