#!/usr/bin/env python3
"""tandem-bench: an open-loop load generator for any OpenAI-compatible endpoint.

  run:  tandem_bench.py run --url http://127.0.0.1:8000 --trace T.jsonl [--time-scale S] ...
        tandem_bench.py run --url ... --fixed --num-requests N --input-tokens L --output-tokens O
                            [--rate R (Poisson, per second; default: all at once)]
        Writes --out JSON (summary + per-request records) and, with --plot, a PNG.
  plot: tandem_bench.py plot --out fig.png A.json B.json ...   (overlays runs: CDFs, TTFT over time)
  burst: tandem_bench.py burst --url ... --concurrency N --output-tokens O [--router-pid PID]
        N streams at once; prints served / refused / broken, TTFT p50/p90, output tokens/s and,
        given the router's pid, its peak RSS. Refused: answered 429/503 before any stream byte;
        broken: a stream that started and then failed or ended without [DONE] (must be 0).

Open loop: every request is sent at its arrival time whatever the server's state, so a slow server
builds a queue instead of slowing the load. Trace prompts: each trace hash id becomes a fixed block
of single-token words of the server's tokenizer (--tokenizer), so equal hash ids are equal tokens
and the server's prefix cache sees what the trace's did. Stdlib only; plots need matplotlib.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import client  # noqa: E402
import report  # noqa: E402
import workload  # noqa: E402


def parse_args(argv):
    p = argparse.ArgumentParser(prog="tandem-bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="send a workload and measure it")
    run.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:8000")
    run.add_argument("--model", help="model name (default: the first of GET /v1/models)")
    run.add_argument("--label", default="", help="name of this run in plots")
    src = run.add_mutually_exclusive_group(required=True)
    src.add_argument("--trace", type=Path, help="Mooncake-format JSONL trace")
    src.add_argument("--fixed", action="store_true", help="fixed-length requests (see --rate)")
    run.add_argument("--trace-block-size", type=int, default=512,
                     help="tokens per hash id in the trace (Mooncake: 512)")
    run.add_argument("--block-tokens", type=int, default=16,
                     help="server tokens each trace block becomes (a multiple of the KV block size"
                          " keeps blocks aligned)")
    run.add_argument("--time-scale", type=float, default=1.0,
                     help="compress the trace's time this many times")
    run.add_argument("--start-ms", type=float, default=0, help="skip trace requests before this")
    run.add_argument("--duration-s", type=float, default=math.inf,
                     help="stop at this many (compressed) seconds of arrivals")
    run.add_argument("--max-requests", type=int, help="at most this many requests")
    run.add_argument("--output-scale", type=float, default=1.0,
                     help="multiply trace output lengths by this")
    run.add_argument("--max-output-tokens", type=int, default=1 << 20,
                     help="cap every request's max_tokens")
    run.add_argument("--max-input-tokens", type=int, default=1 << 30,
                     help="skip requests with longer prompts (the model's context)")
    run.add_argument("--num-requests", type=int, default=100)
    run.add_argument("--input-tokens", type=int, default=128)
    run.add_argument("--output-tokens", type=int, default=32)
    run.add_argument("--rate", type=float, default=math.inf,
                     help="--fixed arrivals per second, Poisson (default: all at once)")
    run.add_argument("--seed", type=int, default=1)
    run.add_argument("--tokenizer",
                     help="the server's tokenizer: llama2.c tokenizer.bin, tokenizer.json, or a"
                          " model directory holding one (default: plain English words)")
    run.add_argument("--slo-ttft-s", type=float, default=1.0)
    run.add_argument("--slo-itl-s", type=float, default=0.1)
    run.add_argument("--timeout-s", type=float, default=300)
    run.add_argument("--ignore-eos", action="store_true",
                     help="send ignore_eos (vLLM/SGLang extension) so outputs reach max_tokens")
    run.add_argument("--out", type=Path, required=True, help="JSON results")
    run.add_argument("--emit-trace", type=Path, metavar="FILE",
                     help="write the workload sent, in Mooncake format (ms after --time-scale,"
                          " blocks of --block-tokens): replay it with tandem-sim --block-size")
    run.add_argument("--plot", type=Path, help="PNG of this run")
    burst = sub.add_parser("burst", help="N concurrent streams at once")
    burst.add_argument("--url", required=True)
    burst.add_argument("--model", help="model name (default: the first of GET /v1/models)")
    burst.add_argument("--concurrency", type=int, default=1000)
    burst.add_argument("--input-tokens", type=int, default=16,
                       help="approximate prompt length in words")
    burst.add_argument("--output-tokens", type=int, default=32)
    burst.add_argument("--distinct-prompts", type=int, default=64,
                       help="prompts cycle through this many variants")
    burst.add_argument("--ignore-eos", action="store_true")
    burst.add_argument("--timeout-s", type=float, default=600)
    burst.add_argument("--router-pid", type=int, help="report this process's peak RSS")
    burst.add_argument("--out", type=Path, help="JSON results")
    idle = sub.add_parser("idle", help="router memory per open, idle stream")
    idle.add_argument("--url", required=True)
    idle.add_argument("--router-pid", type=int, required=True)
    idle.add_argument("--streams", type=int, default=10000)
    idle.add_argument("--settle-s", type=float, default=120,
                      help="longest wait for the router to hold every stream")
    plot = sub.add_parser("plot", help="overlay the runs of several JSON results")
    plot.add_argument("--out", type=Path, required=True)
    plot.add_argument("--title", default="")
    plot.add_argument("results", type=Path, nargs="+")
    return p.parse_args(argv)


def build_requests(args) -> list[workload.BenchRequest]:
    if args.fixed:
        return workload.fixed_requests(args.num_requests, args.input_tokens, args.output_tokens,
                                       args.rate, args.seed)
    rows = workload.read_trace(args.trace, args.trace_block_size)
    requests = workload.trace_requests(
        rows, args.trace_block_size, args.block_tokens, args.time_scale, args.output_scale,
        args.max_output_tokens, args.start_ms, args.duration_s, None)
    kept = [r for r in requests if r.input_tokens + r.output_tokens <= args.max_input_tokens]
    if len(kept) < len(requests):
        print(f"note: {len(requests) - len(kept)} requests longer than --max-input-tokens "
              f"{args.max_input_tokens} left out", file=sys.stderr)
    return kept[:args.max_requests] if args.max_requests else kept


async def replay(args, model: str, requests, vocab) -> tuple[list[client.Result], float]:
    start = time.perf_counter()
    prompts = [vocab.prompt(r, args.block_tokens) for r in requests]

    async def one(i: int, r: workload.BenchRequest):
        delay = r.arrival_s - (time.perf_counter() - start)
        if delay > 0:
            await asyncio.sleep(delay)
        return await client.stream_completion(args.url, model, prompts[i], r.output_tokens, i,
                                              start, args.timeout_s, args.ignore_eos)

    results = await asyncio.gather(*(one(i, r) for i, r in enumerate(requests)))
    return list(results), time.perf_counter() - start


def command_run(args) -> int:
    requests = build_requests(args)
    if not requests:
        print("error: no usable requests", file=sys.stderr)
        return 1
    try:
        vocab = workload.load_vocabulary(args.tokenizer)
    except (OSError, ValueError, ImportError) as e:
        print(f"error: --tokenizer {args.tokenizer}: {e}", file=sys.stderr)
        return 1
    if args.emit_trace:
        rows = workload.mooncake_rows(requests, args.block_tokens)
        args.emit_trace.write_text("".join(json.dumps(row) + "\n" for row in rows))
    model = args.model or client.served_model(args.url)
    print(f"tandem-bench: {workload.describe(requests)} -> {args.url} ({model})", file=sys.stderr)
    results, wall = asyncio.run(replay(args, model, requests, vocab))
    summary = report.summarize(results, wall, args.slo_ttft_s, args.slo_itl_s)
    summary["label"] = args.label
    out = {"summary": summary,
           "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()
                      if not (isinstance(v, float) and math.isinf(v))},
           "requests": [dataclasses.asdict(r) for r in results]}
    args.out.write_text(json.dumps(out, indent=1))
    print(json.dumps(summary))
    if args.plot:
        report.plot([(args.label or args.out.stem, out["requests"])], args.plot, args.label)
    return 0 if summary["succeeded"] > 0 else 1


def peak_rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def burst_summary(results: list[client.Result], wall_s: float) -> dict:
    served = [r for r in results if r.ok]
    refused = [r for r in results if r.status in (429, 503)]
    broken = [r for r in results if r.broken]
    ttft = [r.ttft_s for r in served]
    tokens = sum(r.completion_tokens for r in served)
    return {
        "concurrency": len(results),
        "served": len(served),
        "refused": len(refused),
        "broken": len(broken),
        "other_failures": len(results) - len(served) - len(refused) - len(broken),
        "ttft_p50_s": report.percentile(ttft, 50),
        "ttft_p90_s": report.percentile(ttft, 90),
        "output_tokens_per_s": tokens / wall_s if wall_s > 0 else None,
        "wall_s": wall_s,
        "first_errors": sorted({r.error for r in results if r.error})[:5],
    }


def command_burst(args) -> int:
    model = args.model or client.served_model(args.url)
    words = ["once", "upon", "a", "time", "there", "was", "little", "girl", "named", "lily",
             "she", "liked", "to", "play", "in", "the", "park", "with", "her", "dog"]
    prompts = []
    for v in range(max(1, args.distinct_prompts)):
        prompts.append(" ".join(words[(v + i * 7) % len(words)] for i in range(args.input_tokens)))

    async def go():
        start = time.perf_counter()
        results = await asyncio.gather(*(
            client.stream_completion(args.url, model, prompts[i % len(prompts)],
                                     args.output_tokens, i, start, args.timeout_s,
                                     args.ignore_eos)
            for i in range(args.concurrency)))
        return list(results), time.perf_counter() - start

    results, wall = asyncio.run(go())
    summary = burst_summary(results, wall)
    if args.router_pid:
        summary["router_peak_rss_kib"] = peak_rss_kib(args.router_pid)
    print(json.dumps(summary))
    if args.out:
        args.out.write_text(json.dumps({"summary": summary,
                                        "requests": [dataclasses.asdict(r) for r in results]}))
    return 0 if summary["broken"] == 0 and summary["other_failures"] == 0 else 1


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise ValueError(f"no VmRSS for pid {pid}")


def router_metrics(url: str, names, timeout: float = 30) -> dict:
    """{name: value} of the unlabelled series `names` the router exports (absent ones left out);
    one scrape of /metrics."""
    import urllib.request
    with urllib.request.urlopen(url.rstrip("/") + "/metrics", timeout=timeout) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in names:
            out[name] = float(value)
    return out


def router_metric(url: str, name: str) -> float:
    return router_metrics(url, (name,)).get(name, 0.0)


def command_idle(args) -> int:
    """Opens --streams streaming requests that the router holds without serving them (start the
    router with --max-in-flight 1 and a long first request, or workers that are busy), then
    samples the router's RSS: (RSS with them open - RSS before) / streams."""
    from urllib.parse import urlsplit
    parts = urlsplit(args.url)
    model = client.served_model(args.url)
    body = json.dumps({"model": model, "prompt": "once upon a time", "max_tokens": 8,
                       "stream": True}).encode()
    request = (f"POST /v1/completions HTTP/1.1\r\nHost: {parts.hostname}\r\n"
               f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
               ).encode() + body

    async def go():
        before = rss_kib(args.router_pid)
        writers = []
        for _ in range(args.streams):
            _, w = await asyncio.open_connection(parts.hostname, parts.port)
            w.write(request)
            writers.append(w)
        await asyncio.gather(*(w.drain() for w in writers))
        deadline = time.monotonic() + args.settle_s
        held = 0.0
        while time.monotonic() < deadline:
            held = router_metric(args.url, "tandem_router_queue_depth") + \
                router_metric(args.url, "tandem_router_active_requests")
            if held >= args.streams:
                break
            await asyncio.sleep(0.5)
        await asyncio.sleep(1)
        during = rss_kib(args.router_pid)
        for w in writers:
            w.close()
        return before, during, held

    before, during, held = asyncio.run(go())
    out = {"streams": args.streams, "held_by_router": held, "router_rss_before_kib": before,
           "router_rss_with_streams_kib": during,
           "kib_per_stream": (during - before) / args.streams}
    print(json.dumps(out))
    return 0 if held >= args.streams else 1


def command_plot(args) -> int:
    runs = []
    for path in args.results:
        data = json.loads(path.read_text())
        runs.append((data["summary"].get("label") or path.stem, data["requests"]))
    return 0 if report.plot(runs, args.out, args.title) else 1


def main(argv=None) -> int:
    args = parse_args(argv if argv is not None else sys.argv[1:])
    if args.command == "burst":
        return command_burst(args)
    if args.command == "idle":
        return command_idle(args)
    return command_run(args) if args.command == "run" else command_plot(args)


if __name__ == "__main__":
    sys.exit(main())
