"""tandem-bench figures (JSON summary) and plots (latency CDFs, TTFT over time)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

from client import Result


def percentile(values: list[float], p: float) -> float | None:
    """Nearest rank, as tandem-sim reports."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def summarize(results: list[Result], wall_s: float, slo_ttft_s: float, slo_itl_s: float) -> dict:
    ok = [r for r in results if r.ok]
    ttft = [r.ttft_s for r in ok]
    itl = [x for r in ok for x in r.itl_s]
    e2e = [r.e2e_s for r in ok]
    prompt = sum(r.prompt_tokens for r in ok)
    reported = [r for r in ok if r.cached_tokens is not None]
    cached = sum(r.cached_tokens for r in reported)
    prompt_reported = sum(r.prompt_tokens for r in reported)

    def meets_slo(r: Result) -> bool:
        worst_itl = max(r.itl_s) if r.itl_s else 0.0
        mean_itl = sum(r.itl_s) / len(r.itl_s) if r.itl_s else 0.0
        return r.ttft_s <= slo_ttft_s and mean_itl <= slo_itl_s and worst_itl < math.inf

    good = [r for r in ok if meets_slo(r)]
    out = {
        "requests": len(results),
        "succeeded": len(ok),
        "failed": len(results) - len(ok),
        "errors": sorted({r.error for r in results if not r.ok})[:10],
        "wall_s": wall_s,
        "throughput_rps": len(ok) / wall_s if wall_s > 0 else None,
        "output_tokens_per_s": sum(r.completion_tokens for r in ok) / wall_s if wall_s > 0 else None,
        "goodput_rps": len(good) / wall_s if wall_s > 0 else None,
        "slo": {"ttft_s": slo_ttft_s, "mean_itl_s": slo_itl_s},
        "slo_attainment": len(good) / len(results) if results else None,
        "prompt_tokens": prompt,
        "cached_prompt_tokens": cached if reported else None,
        # Token-weighted, over the requests whose server reported cache hits.
        "hit_rate": cached / prompt_reported if prompt_reported else None,
    }
    for name, values in (("ttft", ttft), ("itl", itl), ("e2e", e2e)):
        for p in (50, 90, 99):
            out[f"{name}_p{p}"] = percentile(values, p)
        out[f"{name}_mean"] = sum(values) / len(values) if values else None
    return out


def plot(runs: list[tuple[str, list[dict]]], out: Path, title: str = "") -> bool:
    """runs: (label, per-request records). Four panels: TTFT, ITL and end-to-end CDFs, TTFT over
    the run. Returns False (and says why) when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("note: matplotlib is not installed (pip install -r tests/perf/bench/requirements.txt);"
              " no plot", file=sys.stderr)
        return False
    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    panels = [(axes[0][0], "ttft_s", "TTFT (s)"), (axes[0][1], "itl_s", "inter-token latency (s)"),
              (axes[1][0], "e2e_s", "end-to-end latency (s)")]
    for label, records in runs:
        ok = [r for r in records if r["ok"]]
        for ax, key, xlabel in panels:
            values = sorted(x for r in ok for x in (r[key] if isinstance(r[key], list) else [r[key]]))
            if not values:
                continue
            ys = [(i + 1) / len(values) for i in range(len(values))]
            ax.step(values, ys, where="post", label=label)
            ax.set_xlabel(xlabel)
            ax.set_ylabel("fraction of requests" if key != "itl_s" else "fraction of tokens")
            ax.grid(True, alpha=0.3)
        ax = axes[1][1]
        ax.scatter([r["sent_s"] for r in ok], [r["ttft_s"] for r in ok], s=6, alpha=0.6, label=label)
        ax.set_xlabel("request sent at (s into the run)")
        ax.set_ylabel("TTFT (s)")
        ax.grid(True, alpha=0.3)
    for ax in (axes[0][0], axes[0][1], axes[1][0], axes[1][1]):
        ax.legend(loc="best", fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return True
