#!/usr/bin/env python3
"""Calibrates tandem-sim's cost model against the real CPU cluster and reports its error.

  tests/perf/bench/calibrate_sim.py --build build --trace T.jsonl --out-dir DIR
      [--policy tandem --policy round-robin] [--time-scale 8] [--duration-s 30]

1. Probes: the cluster of cluster_replay.py (router + 2 prefill + 2 decode, stories260K) answers
   fixed-length probe prompts one at a time, each first cold (unique tokens) and then again warm
   (its blocks cached), and fits the simulator's prefill model by least squares:
   TTFT = overhead + uncached tokens x per token + prompt blocks x KV transfer per block.
   Decode: concurrent requests at several batch sizes and prompt lengths, median inter-token gap
   fitted as step = base + per sequence x batch + per block x KV blocks held (per decode worker).
   The workers export no prefill/decode duration histograms, so probes are the source. Bursts
   of equal cold prompts (not fitted) show how concurrent prefills compare with the simulator's
   FIFO model.
2. Replays a slice of the trace through the real cluster with tandem-bench per policy,
   --emit-trace writing exactly what was sent.
3. Runs tandem-sim on each emitted trace (2 + 2 workers, the real KV pools in blocks,
   --block-size 16) with the fitted costs, and with the simulator's defaults for reference.
4. Prints real vs simulated hit rate, TTFT p50/p90 and ITL p50 with relative errors; writes
   DIR/calibration.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent))

import client  # noqa: E402
import cluster_replay  # noqa: E402
import tandem_bench  # noqa: E402
import workload  # noqa: E402

BLOCK_TOKENS = 16           # the workers' KV block size, and tandem-bench's tokens per trace block
PROBE_IDS = 1 << 48         # probe hash ids: far from any trace's, so probes share nothing

COST_FLAGS = {  # SimConfig field -> tandem-sim flag
    "prefill_overhead_s": "--prefill-overhead-s",
    "prefill_s_per_token": "--prefill-s-per-token",
    "kv_transfer_s_per_block": "--kv-transfer-s-per-block",
    "decode_base_s": "--decode-base-s",
    "decode_per_seq_s": "--decode-per-seq-s",
    "decode_per_block_s": "--decode-per-block-s",
}


def least_squares(rows: list[list[float]], y: list[float]) -> list[float]:
    """Non-negative least squares for a handful of columns: solve, drop the columns that came out
    negative (a cost cannot be), solve again. Normal equations, Gaussian elimination: stdlib."""
    # Columns scaled to 1 (seconds per token and per request differ by 10^4): a collinear column
    # then shows as a tiny pivot instead of hiding in rounding.
    scale = [max(abs(r[i]) for r in rows) or 1.0 for i in range(len(rows[0]))]
    active = list(range(len(rows[0])))
    while True:
        a = [[sum(r[i] * r[j] for r in rows) / (scale[i] * scale[j]) for j in active]
             for i in active]
        b = [sum(r[i] * v for r, v in zip(rows, y)) / scale[i] for i in active]
        coef = _solve(a, b)
        if coef is None:  # collinear: the last column carries no information of its own here
            active = active[:-1]
            continue
        coef = [c / scale[i] for c, i in zip(coef, active)]
        negative = [active[k] for k, c in enumerate(coef) if c < 0]
        if not negative or len(active) == 1:
            out = [0.0] * len(rows[0])
            for k, i in enumerate(active):
                out[i] = max(0.0, coef[k])
            return out
        active = [i for i in active if i not in negative]


def _solve(a: list[list[float]], b: list[float]) -> list[float] | None:
    n = len(b)
    m = [row[:] + [v] for row, v in zip(a, b)]
    largest = max(abs(m[i][i]) for i in range(n))
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(m[r][col]))
        if abs(m[pivot][col]) < 1e-9 * largest:
            return None
        m[col], m[pivot] = m[pivot], m[col]
        for r in range(n):
            if r != col:
                f = m[r][col] / m[col][col]
                m[r] = [x - f * y for x, y in zip(m[r], m[col])]
    return [m[i][n] / m[i][i] for i in range(n)]


def kv_pool_blocks(model_bin: Path, pool_mb: int) -> int:
    """Blocks in a worker's `--kv-cache-mb` pool: fp32 K and V per layer, per KV head, per token
    (llama2.c header: dim, hidden, layers, heads, kv heads, vocab, seq len)."""
    dim, _, layers, heads, kv_heads, _, _ = struct.unpack("<7i", model_bin.read_bytes()[:28])
    block_bytes = 2 * layers * kv_heads * (dim // heads) * 4 * BLOCK_TOKENS
    return pool_mb * 1024 * 1024 // block_bytes


def tpot(completion_tokens: int, ttft_s: float | None, e2e_s: float | None) -> float | None:
    """A request's mean time per output token after the first: its decode step time. The median
    gap between streamed chunks is not: the router forwards tokens that arrive together as one
    chunk, so most gaps are microseconds and a few are several steps."""
    if completion_tokens < 2 or ttft_s is None or e2e_s is None:
        return None
    return (e2e_s - ttft_s) / (completion_tokens - 1)


class Prober:
    def __init__(self, url: str, model: str, vocab: workload.Vocabulary):
        self.url, self.model, self.vocab = url, model, vocab
        self.next_id = PROBE_IDS
        self.start = time.perf_counter()

    def prompt(self, tokens: int) -> str:
        blocks = -(-tokens // BLOCK_TOKENS)
        ids = list(range(self.next_id, self.next_id + blocks))
        self.next_id += blocks
        return self.vocab.prompt(workload.BenchRequest(0, tokens, 0, ids), BLOCK_TOKENS)

    async def send(self, prompt: str, max_tokens: int) -> client.Result:
        r = await client.stream_completion(self.url, self.model, prompt, max_tokens, 0, self.start,
                                           60, ignore_eos=True)
        if not r.ok:
            raise RuntimeError(f"probe failed: {r.error}")
        return r

    async def prefill(self, sizes: list[int], repeats: int) -> list[dict]:
        """One at a time: no queueing, so TTFT is the prefill, the handoff and the first token."""
        samples = []
        for _ in range(repeats):
            for n in sizes:
                text = self.prompt(n)
                for kind in ("cold", "warm"):
                    r = await self.send(text, 1)
                    cached = r.cached_tokens or 0
                    samples.append({"kind": kind, "prompt_tokens": r.prompt_tokens,
                                    "cached_tokens": cached, "ttft_s": r.ttft_s})
                    # Let the worker's KV events reach the router before the warm repeat.
                    await asyncio.sleep(0.3)
        return samples

    async def bursts(self, sizes: list[int], tokens: int, repeats: int) -> list[dict]:
        """`k` equal cold prompts at once, for each k."""
        out = []
        for _ in range(repeats):
            for k in sizes:
                results = await asyncio.gather(*(self.send(self.prompt(tokens), 1)
                                                 for _ in range(k)))
                ttft = [r.ttft_s for r in results]
                out.append({"requests": k, "prompt_tokens": results[0].prompt_tokens,
                            "ttft_mean_s": statistics.mean(ttft), "ttft_max_s": max(ttft)})
                await asyncio.sleep(0.3)
        return out

    async def decode(self, batches: list[int], lengths: list[int], output: int,
                     decode_workers: int) -> list[dict]:
        """`batch` x decode_workers concurrent requests: about `batch` per decode worker."""
        samples = []
        for n in lengths:
            for b in batches:
                results = await asyncio.gather(*(self.send(self.prompt(n), output)
                                                 for _ in range(b * decode_workers)))
                held = b * -(-(n + output // 2) // BLOCK_TOKENS)  # mean KV blocks per worker
                samples.append({"batch": b, "prompt_tokens": n, "kv_blocks": held,
                                "step_s": statistics.median(
                                    tpot(r.completion_tokens, r.ttft_s, r.e2e_s) for r in results),
                                "itl_p50_s": statistics.median(x for r in results
                                                               for x in r.itl_s)})
                await asyncio.sleep(0.2)
        return samples


def fifo_prediction(burst: dict, costs: dict, prefill_workers: int) -> dict:
    """What the simulator's model predicts for a burst of equal cold prompts split evenly: each
    worker runs its share one after another, so the i-th finishes after i prefills."""
    n = burst["prompt_tokens"]
    prefill = costs["prefill_overhead_s"] + costs["prefill_s_per_token"] * n
    handoff = costs["kv_transfer_s_per_block"] * -(-n // BLOCK_TOKENS)
    share = -(-burst["requests"] // prefill_workers)
    return {"ttft_mean_s": prefill * (share + 1) / 2 + handoff,
            "ttft_max_s": prefill * share + handoff}


def fit_costs(prefill: list[dict], decode: list[dict]) -> dict:
    rows = [[1.0, s["prompt_tokens"] - s["cached_tokens"], -(-s["prompt_tokens"] // BLOCK_TOKENS)]
            for s in prefill]
    overhead, per_token, per_block = least_squares(rows, [s["ttft_s"] for s in prefill])
    base, per_seq, per_kv_block = least_squares(
        [[1.0, s["batch"], s["kv_blocks"]] for s in decode], [s["step_s"] for s in decode])
    return {"prefill_overhead_s": overhead, "prefill_s_per_token": per_token,
            "kv_transfer_s_per_block": per_block, "decode_base_s": base,
            "decode_per_seq_s": per_seq, "decode_per_block_s": per_kv_block}


def cluster_args(args, out_dir: Path) -> SimpleNamespace:
    """What cluster_replay.Cluster reads from its command line."""
    return SimpleNamespace(build=args.build, model=args.model, kv_cache_mb=args.kv_cache_mb,
                           decode_kv_cache_mb=args.decode_kv_cache_mb, out_dir=out_dir)


def measure(args) -> dict:
    probe_dir = args.out_dir / "probe"
    probe_dir.mkdir(parents=True, exist_ok=True)
    # tandem routes a warm repeat to the worker holding its blocks; round-robin would not.
    cluster = cluster_replay.Cluster(cluster_args(args, probe_dir), "tandem", probe_dir)
    try:
        cluster.start()
        url = f"http://127.0.0.1:{cluster.http}"
        prober = Prober(url, client.served_model(url),
                        workload.load_vocabulary(str(args.model / "tokenizer.bin")))
        prefill = asyncio.run(prober.prefill([16, 64, 128, 224, 320, 448], args.probe_repeats))
        decode = asyncio.run(prober.decode([1, 2, 4, 8], [16, 256], 32, 2))
        # Not fitted: shows how concurrent prefills behave against the simulator's FIFO model.
        bursts = asyncio.run(prober.bursts([2, 4, 8], 192, 2))
    finally:
        cluster.stop()
    fitted = fit_costs(prefill, decode)
    for b in bursts:
        b["sim_model"] = fifo_prediction(b, fitted, 2)
    return {"prefill_probes": prefill, "decode_probes": decode, "bursts": bursts,
            "fitted": fitted}


def replay(args, policy: str) -> tuple[dict, Path]:
    cluster = cluster_replay.Cluster(cluster_args(args, args.out_dir), policy, args.out_dir)
    out, emitted = args.out_dir / f"{policy}.json", args.out_dir / f"{policy}.sent.jsonl"
    try:
        cluster.start()
        rc = tandem_bench.main([
            "run", "--url", f"http://127.0.0.1:{cluster.http}", "--label", policy,
            "--trace", str(args.trace), "--time-scale", str(args.time_scale),
            "--duration-s", str(args.duration_s), "--block-tokens", str(BLOCK_TOKENS),
            "--output-scale", "0.02", "--max-output-tokens", "12", "--max-input-tokens", "500",
            "--tokenizer", str(args.model / "tokenizer.bin"), "--timeout-s", "60",
            "--out", str(out), "--emit-trace", str(emitted)])
    finally:
        cluster.stop()
    if rc != 0:
        raise RuntimeError(f"tandem-bench failed for {policy}")
    return real_figures(json.loads(out.read_text())), emitted


def simulate(args, policy: str, trace: Path, costs: dict | None) -> dict:
    cmd = [str(args.build / "tools/sim/tandem-sim"), "--trace", str(trace), "--policy", policy,
           "--prefill-workers", "2", "--decode-workers", "2", "--block-size", str(BLOCK_TOKENS),
           "--capacity-blocks", str(kv_pool_blocks(args.model / "model.bin", args.kv_cache_mb)),
           "--decode-capacity-blocks",
           str(kv_pool_blocks(args.model / "model.bin", args.decode_kv_cache_mb))]
    for field, value in (costs or {}).items():
        cmd += [COST_FLAGS[field], repr(value)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {done.returncode}: {done.stderr[-500:]}")
    return json.loads(done.stdout.splitlines()[0])


# (name, real key, sim key): the sim's tokens each take one decode step, so its ITL p50 is the
# step time the real requests' TPOT measures (the real ITL p50 is shown for completeness).
METRICS = (("hit rate", "hit_rate", "hit_rate"), ("TTFT p50 (s)", "ttft_p50", "ttft_p50"),
           ("TTFT p90 (s)", "ttft_p90", "ttft_p90"), ("ITL p50 (s)", "itl_p50", "itl_p50"),
           ("TPOT p50 vs sim ITL p50 (s)", "tpot_p50", "itl_p50"))


def real_figures(bench: dict) -> dict:
    figures = {real: bench["summary"][real] for _, real, _ in METRICS if real != "tpot_p50"}
    steps = [tpot(r["completion_tokens"], r["ttft_s"], r["e2e_s"]) for r in bench["requests"]
             if r["ok"]]
    steps = [x for x in steps if x is not None]
    figures["tpot_p50"] = statistics.median(steps) if steps else None
    return figures


def relative_error(sim: float | None, real: float | None) -> float | None:
    if sim is None or real is None or real == 0:
        return None
    return (sim - real) / real


def table(rows: list[dict]) -> str:
    lines = ["| policy | metric | real | sim (fitted) | error | sim (defaults) | error |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for row in rows:
        for name, real_key, sim_key in METRICS:
            real = row["real"][real_key]
            cells = ["n/a" if real is None else f"{real:.3g}"]
            for sim in (row["sim"][sim_key], row["sim_default"][sim_key]):
                error = relative_error(sim, real)
                cells += [f"{sim:.3g}", "n/a" if error is None else f"{error:+.0%}"]
            lines.append(f"| {row['policy']} | {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", type=Path, required=True)
    p.add_argument("--model", type=Path,
                   default=Path(__file__).resolve().parents[4] / "shared/models/stories260K")
    p.add_argument("--trace", type=Path, required=True)
    p.add_argument("--policy", action="append", help="default: tandem and round-robin")
    p.add_argument("--time-scale", type=float, default=8)
    p.add_argument("--duration-s", type=float, default=30)
    p.add_argument("--kv-cache-mb", type=int, default=16)
    p.add_argument("--decode-kv-cache-mb", type=int, default=64)
    p.add_argument("--probe-repeats", type=int, default=3)
    p.add_argument("--out-dir", type=Path, required=True)
    args = p.parse_args()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    policies = args.policy or ["tandem", "round-robin"]
    started = time.time()
    load = {"start": os.getloadavg()}
    measured = measure(args)
    print("fitted: " + json.dumps(measured["fitted"]), file=sys.stderr)
    rows = []
    for policy in policies:
        real, emitted = replay(args, policy)
        rows.append({"policy": policy, "real": real,
                     "sim": simulate(args, policy, emitted, measured["fitted"]),
                     "sim_default": simulate(args, policy, emitted, None)})
    load["end"] = os.getloadavg()
    result = {"fitted": measured["fitted"], "results": rows, "load_average": load,
              "wall_s": time.time() - started, "probes": measured,
              "config": {k: str(v) for k, v in vars(args).items()}}
    (args.out_dir / "calibration.json").write_text(json.dumps(result, indent=1))
    print("fitted: " + ", ".join(f"{k}={v:.3g}" for k, v in measured["fitted"].items()))
    print(table(rows))
    print("bursts of cold 192-token prompts (TTFT mean / max, s): real vs the sim's FIFO model")
    for b in measured["bursts"]:
        m = b["sim_model"]
        print(f"  {b['requests']} at once: real {b['ttft_mean_s']:.3f} / {b['ttft_max_s']:.3f}, "
              f"model {m['ttft_mean_s']:.3f} / {m['ttft_max_s']:.3f}")
    print(f"load average {load['start'][0]:.1f} -> {load['end'][0]:.1f}, "
          f"{result['wall_s']:.0f} s; details in {args.out_dir / 'calibration.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
