#!/usr/bin/env python3
"""tandem's serving path beside vLLM's CPU build, driven by the same real client (aiperf) on the
same random-weight Llama checkpoint, one server at a time. Prints TTFT p50/p90 and output tokens/s
per concurrency and the ratios tandem/vLLM (for TTFT lower is better: the goal is a ratio <= 1;
for tokens/s >= 1). Not a test.

  tests/perf/peers/setup.sh vllm client     # once: peers into ~/.cache/tandem-peers
  cmake --build BUILD --target tandem-router tandem-worker
  python3 tests/perf/peers/serving_vs_vllm.py --build-dir BUILD [--dtype f32]
      [--concurrency 1 8 64] [--requests-per-concurrency 2] [--request-rate 200]
      [--only tandem|vllm]

tandem: tandem-router + one combined tandem-worker (--threads THREADS). vLLM: its OpenAI server
(python -m vllm.entrypoints.openai.api_server), OMP threads bound to the same cores. Both get
1 GiB of KV cache. Requests: /v1/completions, streaming, 128 prompt tokens (aiperf's synthetic
prompts, counted with the checkpoint's tokenizer), 64 output tokens, greedy; the checkpoint makes
EOS unreachable under greedy (tools/llama_checkpoint), so both produce all 64 tokens without
ignore_eos. Output tokens are the servers' own usage counts.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PEERS = Path(os.environ.get("PEERS", Path.home() / ".cache" / "tandem-peers"))
PY = PEERS / "venv" / "bin" / "python"
AIPERF = PEERS / "venv-client" / "bin" / "aiperf"
TORCH_DTYPE = {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def checkpoint(dtype):
    out = PEERS / "models" / f"llama287m-{dtype}"
    if not (out / "config.json").exists():
        subprocess.run([str(PY), str(ROOT / "tools/llama_checkpoint/make_random_llama.py"), str(out),
                        "--dtype", dtype], check=True)
    return out


def wait_ready(url, procs, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        for p in procs:
            if p.poll() is not None:
                raise RuntimeError(f"server exited with {p.returncode} during start-up")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(1)
    raise RuntimeError(f"{url} not ready within {timeout} s")


class Server:
    def __init__(self, name, log_dir):
        self.name, self.log_dir, self.procs = name, log_dir, []

    def spawn(self, tag, cmd, env=None):
        log = open(self.log_dir / f"{self.name}-{tag}.log", "w")
        print("$ " + " ".join(str(c) for c in cmd), flush=True)
        p = subprocess.Popen([str(c) for c in cmd], stdout=log, stderr=subprocess.STDOUT, env=env,
                             start_new_session=True)
        self.procs.append(p)
        return p

    def stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def start_tandem(a, model, log_dir):
    s = Server("tandem", log_dir)
    build = Path(a.build_dir)
    http, control = free_port(), free_port()
    s.spawn("router", [build / "services/router/tandem-router", "--model", model,
                       "--http-listen", f"127.0.0.1:{http}",
                       "--control-listen", f"127.0.0.1:{control}"])
    s.spawn("worker", [build / "services/worker/tandem-worker", "--model", model,
                       "--router", f"127.0.0.1:{control}", "--threads", a.threads,
                       "--kv-cache-mb", 1024, "--max-num-seqs", 64])
    url = f"http://127.0.0.1:{http}"
    wait_ready(url + "/ready", s.procs, 300)
    return s, url, model.name


def start_vllm(a, model, log_dir):
    s = Server("vllm", log_dir)
    if a.vllm_url:  # its start-up (compiling its kernels) takes minutes on 2 cores
        wait_ready(a.vllm_url + "/health", [], 10)
        return s, a.vllm_url, model.name
    port = free_port()
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1",
               VLLM_CPU_OMP_THREADS_BIND=f"0-{a.threads - 1}", VLLM_CPU_NUM_OF_RESERVED_CPU="0",
               OMP_NUM_THREADS=str(a.threads))
    s.spawn("server", [PY, "-m", "vllm.entrypoints.openai.api_server", "--model", model,
                       "--served-model-name", model.name, "--dtype", TORCH_DTYPE[a.dtype],
                       "--host", "127.0.0.1", "--port", port, "--max-model-len", 1024,
                       "--max-num-seqs", 64, "--seed", 0], env=env)
    url = f"http://127.0.0.1:{port}"
    wait_ready(url + "/health", s.procs, 900)
    return s, url, model.name


def aiperf(url, name, model, concurrency, requests, rate, out_dir):
    # Concurrency-capped arrivals at `rate` per second rather than aiperf's pure concurrency
    # mode: in that mode its timing process polls for a free slot without sleeping and holds one
    # of the two cores for the whole run (measured: 93-100% CPU at 64 streams), which leaves the
    # server under test one core. With a rate, it sleeps between attempts.
    cmd = [AIPERF, "profile", "--model", name, "--url", url, "--endpoint-type", "completions",
           "--streaming", "--tokenizer", model, "--concurrency", concurrency,
           "--request-rate", rate,
           "--request-count", requests, "--warmup-request-count", min(concurrency, 4),
           "--prompt-input-tokens-mean", 128, "--prompt-input-tokens-stddev", 0,
           "--prompt-output-tokens-mean", 64, "--prompt-output-tokens-stddev", 0,
           "--extra-inputs", "temperature:0", "--use-server-token-count", "--random-seed", 1,
           "--ui-type", "none", "--no-server-metrics", "--workers-max", 2,
           "--request-timeout-seconds", 1800, "--output-artifact-dir", out_dir]
    print("$ " + " ".join(str(c) for c in cmd), flush=True)
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=3600)
    found = Path(out_dir) / "phases" / "profiling" / "profile_export_aiperf.json"  # not warm-up's
    if r.returncode != 0 or not found.exists():
        raise RuntimeError(f"aiperf failed ({r.returncode}): {(r.stderr or r.stdout)[-2000:]}")
    m = json.loads(found.read_text())
    metrics = m.get("records", m)

    def get(key, stat):
        v = metrics.get(key)
        return None if v is None else v.get(stat)

    return {"ttft_p50_ms": get("time_to_first_token", "p50"),
            "ttft_p90_ms": get("time_to_first_token", "p90"),
            "output_tps": get("output_token_throughput", "avg"),
            "requests": get("request_count", "avg"),
            "output_len": get("output_sequence_length", "avg"),
            "errors": get("error_request_count", "avg")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", default=os.environ.get("BUILD_DIR", ROOT / "build"))
    ap.add_argument("--dtype", choices=sorted(TORCH_DTYPE), default="f32")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 64])
    ap.add_argument("--requests-per-concurrency", type=float, default=2.0,
                    help="requests per level = max(4, this x concurrency)")
    ap.add_argument("--request-rate", type=float, default=200.0,
                    help="arrivals per second, capped by the concurrency (see aiperf())")
    ap.add_argument("--only", choices=["tandem", "vllm"])
    ap.add_argument("--vllm-url", help="a vLLM server already serving the checkpoint (started as "
                    "start_vllm does, --served-model-name the checkpoint's folder name)")
    ap.add_argument("--keep", action="store_true", help="keep logs and aiperf artifacts")
    a = ap.parse_args()
    model = checkpoint(a.dtype)
    work = Path(tempfile.mkdtemp(prefix="serving-vs-vllm-"))
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load_start = os.getloadavg()
    results, notes = {}, []
    engines = [("tandem", start_tandem), ("vllm", start_vllm)]
    for name, start in engines:
        if a.only and a.only != name:
            continue
        server = None
        try:
            server, url, served = start(a, model, work)
            for c in a.concurrency:
                n = max(4, int(a.requests_per_concurrency * c))
                results[(name, c)] = aiperf(url, served, model, c, n, a.request_rate,
                                             work / f"{name}-c{c}")
                print(name, c, json.dumps(results[(name, c)]), flush=True)
        except Exception as e:  # a peer that cannot run here is a result, not a crash
            notes.append(f"{name}: {e}")
            print(f"{name}: {e}", file=sys.stderr, flush=True)
        finally:
            if server:
                server.stop()

    def f(x, spec=".0f"):
        return format(x, spec) if isinstance(x, (int, float)) else "-"

    print(f"\nserving_vs_vllm: {started}, checkpoint {model.name} ({a.dtype}), {a.threads} threads, "
          f"arrivals {a.request_rate:g}/s capped by the concurrency, "
          f"load {load_start[0]:.2f} {load_start[1]:.2f} {load_start[2]:.2f} at start, "
          f"{os.getloadavg()[0]:.2f} at end")
    print("conc | engine | requests | out len | TTFT p50 ms | TTFT p90 ms | output tok/s")
    for c in a.concurrency:
        for name in ("tandem", "vllm"):
            r = results.get((name, c))
            if r:
                print(f"{c:4} | {name:6} | {f(r['requests'])} | {f(r['output_len'], '.1f')} | "
                      f"{f(r['ttft_p50_ms'])} | {f(r['ttft_p90_ms'])} | {f(r['output_tps'], '.1f')}")
        t, v = results.get(("tandem", c)), results.get(("vllm", c))
        if t and v:
            print(f"{c:4} | ratio tandem/vLLM: TTFT p50 {t['ttft_p50_ms'] / v['ttft_p50_ms']:.2f}, "
                  f"p90 {t['ttft_p90_ms'] / v['ttft_p90_ms']:.2f} (goal <= 1), output tok/s "
                  f"{t['output_tps'] / v['output_tps']:.2f} (goal >= 1)")
    for n in notes:
        print("note: " + n)
    if a.keep:
        print(f"logs and aiperf artifacts: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
