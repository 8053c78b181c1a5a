#!/usr/bin/env python3
"""Real-cluster replay: router + 2 prefill + 2 decode CPU workers (stories260K), a time-compressed
slice of a Mooncake trace through tandem-bench, once per routing policy; optionally the router is
killed (SIGKILL) and restarted on the same ports in the middle of the replay.

  tests/perf/bench/cluster_replay.py --build build --trace T.jsonl --policy tandem --policy round-robin
      [--time-scale 8] [--duration-s 60] [--kv-cache-mb 16] [--restart-router-at 40] --out-dir DIR

Writes DIR/<policy>.json (tandem-bench results, plus the restart's figures) and DIR/replay.png.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report  # noqa: E402
import tandem_bench  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(http_port: int, timeout_s: float) -> bool:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/ready", timeout=1) as r:
                if r.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.1)
    return False


class Cluster:
    def __init__(self, args, policy: str, out_dir: Path):
        self.args, self.policy, self.out_dir = args, policy, out_dir
        self.http, self.control = free_port(), free_port()
        self.router = None
        self.workers = []
        self.router_log = out_dir / f"{policy}.router.log"

    def start_router(self, append: bool = False):
        cmd = [str(self.args.build / "services/router/tandem-router"), "--model", str(self.args.model),
               "--http-listen", f"127.0.0.1:{self.http}",
               "--control-listen", f"127.0.0.1:{self.control}",
               "--routing-policy", self.policy, "--worker-lease-ms", "1500",
               "--max-in-flight", "4096"]
        log = open(self.router_log, "a" if append else "w")
        self.router = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)

    def start(self):
        self.start_router()
        for role in ("prefill", "prefill", "decode", "decode"):
            i = len(self.workers)
            cmd = [str(self.args.build / f"services/{role}/tandem-{role}"),
                   "--model", str(self.args.model), "--router", f"127.0.0.1:{self.control}",
                   "--worker-id", f"{role}{i}", "--threads", "1", "--heartbeat-ms", "200",
                   "--kv-cache-mb", str(self.args.kv_cache_mb if role == "prefill"
                                        else self.args.decode_kv_cache_mb),
                   "--kv-host-mb", "0",
                   "--listen", "127.0.0.1:0"]
            log = open(self.out_dir / f"{self.policy}.{role}{i}.log", "w")
            self.workers.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT))
        if not wait_ready(self.http, 60):
            raise RuntimeError(f"cluster not ready; see {self.router_log}")
        time.sleep(1.0)  # every worker registered and its first snapshot in

    def restart_router(self) -> dict:
        """SIGKILL and restart on the same ports; returns when each prefill worker's snapshot
        reached the new router (seconds after the restart)."""
        killed = time.time()
        self.router.send_signal(signal.SIGKILL)
        self.router.wait()
        with open(self.router_log, "a") as f:
            f.write("=== router killed and restarted by cluster_replay ===\n")
        offset = self.router_log.stat().st_size
        self.start_router(append=True)
        ready = wait_ready(self.http, 30)
        ready_s = time.time() - killed
        snapshots = {}
        deadline = time.time() + 30
        while time.time() < deadline and len(snapshots) < 2:
            text = self.router_log.read_text(errors="replace")[offset:]
            for m in re.finditer(r"worker (prefill\d) KV snapshot at seq (\d+): (\d+) blocks", text):
                snapshots.setdefault(m.group(1), {"after_s": round(time.time() - killed, 3),
                                                  "seq": int(m.group(2)),
                                                  "blocks": int(m.group(3))})
            time.sleep(0.05)
        return {"killed_at_s": killed, "ready": ready, "ready_after_s": round(ready_s, 3),
                "snapshots": snapshots}

    def stop(self):
        for p in self.workers + [self.router]:
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.workers + [self.router]:
            if p is None:
                continue
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()


def router_counters(http_port: int, names) -> dict:
    try:
        return tandem_bench.router_metrics(f"http://127.0.0.1:{http_port}", names, timeout=10)
    except OSError:
        return {}


def run_policy(args, policy: str) -> Path:
    out = args.out_dir / f"{policy}.json"
    cluster = Cluster(args, policy, args.out_dir)
    restart = {}
    try:
        cluster.start()
        timer = None
        if args.restart_router_at is not None:
            def do_restart():
                restart.update(cluster.restart_router())
            timer = threading.Timer(args.restart_router_at, do_restart)
            timer.start()
        start = time.time()
        rc = tandem_bench.main([
            "run", "--url", f"http://127.0.0.1:{cluster.http}", "--label", policy,
            "--trace", str(args.trace), "--time-scale", str(args.time_scale),
            "--duration-s", str(args.duration_s), "--block-tokens", "16",
            "--output-scale", str(args.output_scale), "--max-output-tokens", str(args.max_output),
            "--max-input-tokens", "500", "--tokenizer", str(args.model / "tokenizer.bin"),
            "--slo-ttft-s", str(args.slo_ttft_s), "--timeout-s", "60", "--out", str(out)])
        if timer is not None:
            timer.join()
        if rc != 0:
            raise RuntimeError(f"tandem-bench failed for {policy}")
        # The router's own counters of the run (tandem's warm-ups), kept with its requests.
        counters = router_counters(cluster.http, ("tandem_router_prefill_warm_ups_total",
                                                  "tandem_router_prefill_warm_ups_failed_total",
                                                  "tandem_router_prefill_held_moves_total",
                                                  "tandem_router_prefill_pieces_total"))
        data = json.loads(out.read_text())
        data["router_counters"] = counters
        print(json.dumps({"policy": policy, "router_counters": counters}))
        if restart:
            killed_rel = restart["killed_at_s"] - start
            failed = [r for r in data["requests"] if not r["ok"]]
            # In flight to the router when it died, or sent while it was down.
            window = (killed_rel - 60, killed_rel + restart["ready_after_s"])
            restart["failed_total"] = len(failed)
            restart["failed_outside_restart_window"] = sum(
                1 for r in failed if not window[0] <= r["sent_s"] <= window[1])
            restart["killed_at_s"] = round(killed_rel, 3)
            data["router_restart"] = restart
            print(json.dumps({"policy": policy, "router_restart": restart}))
        out.write_text(json.dumps(data, indent=1))
    finally:
        cluster.stop()
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", type=Path, required=True)
    p.add_argument("--model", type=Path,
                   default=Path(__file__).resolve().parents[4] / "shared/models/stories260K")
    p.add_argument("--trace", type=Path, required=True)
    p.add_argument("--policy", action="append", required=True)
    p.add_argument("--time-scale", type=float, default=8)
    p.add_argument("--duration-s", type=float, default=60)
    p.add_argument("--output-scale", type=float, default=0.02)
    p.add_argument("--max-output", type=int, default=12)
    p.add_argument("--kv-cache-mb", type=int, default=16,
                   help="prefill workers' KV pool (the prefix cache the policies compete for)")
    p.add_argument("--decode-kv-cache-mb", type=int, default=64,
                   help="decode workers' KV pool (room for the requests in flight)")
    p.add_argument("--slo-ttft-s", type=float, default=0.5)
    p.add_argument("--restart-router-at", type=float)
    p.add_argument("--out-dir", type=Path, required=True)
    args = p.parse_args()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    results = [run_policy(args, policy) for policy in args.policy]
    runs = []
    for path in results:
        data = json.loads(path.read_text())
        s = data["summary"]
        print(json.dumps({k: s[k] for k in ("label", "succeeded", "failed", "hit_rate", "ttft_p50",
                                            "ttft_p90", "ttft_p99", "itl_p50", "e2e_p90")}))
        runs.append((s["label"], data["requests"]))
    report.plot(runs, args.out_dir / "replay.png",
                f"{args.trace.name}, x{args.time_scale} time, 2 prefill + 2 decode, stories260K")
    return 0


if __name__ == "__main__":
    sys.exit(main())
