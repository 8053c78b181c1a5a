#!/usr/bin/env python3
"""Soak test: a cluster under a mixed load for a long time, watched for leaks and lost requests.

Starts tandem-router + tandem-prefill + tandem-decode on loopback (ports 0, a temporary
directory), measures the cluster's capacity with a short closed loop, then drives an open-loop
mixed load at --load (default 80 %) of it for --duration seconds:

  * the four generation APIs (OpenAI /v1/completions, /v1/chat/completions, /v1/responses,
    Anthropic /v1/messages), streaming and not, greedy and seeded;
  * cancellations (the client closes its connection right after sending: the request is queued
    or being prefilled) and disconnects mid-stream (after a few events);
  * bad requests: malformed JSON, a body over --max-body-bytes, fields of the wrong type or out
    of range, an unknown model.

Every SAMPLE seconds it records each process's RSS, open file descriptors and threads (from
/proc) and the workers' KV block gauges (/metrics). It fails (exit 1) when

  * any request was lost: a generation that was neither cancelled on purpose nor a bad request
    and did not get a complete answer (200 and the protocol's terminal event, no error event;
    or a complete non-streaming body); a 429 counts as lost too;
  * a bad request got anything but a 4xx with an error body (a 5xx, no answer);
  * a process grew: after the warm-up, the median of the last quarter of the samples exceeds
    the largest value of the first quarter by more than the tolerance (RSS: 5 % + 8 MiB;
    fds and threads: 8; see --help and docs/operations.md for why);
  * once the load stops, the cluster does not return to idle: every worker's KV blocks free
    again (tandem_worker_kv_free_blocks = total), no reservation or handoff open, no request
    active on a worker or in the router.

Python standard library only (any python3; tests/run.sh's .venv works too).
"""

import argparse
import http.client
import json
import os
import queue
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

PROMPTS = [
    "Once upon a time", "The boy and the girl", "Lily wanted to play", "One day a little dog",
    "The sun was shining", "Tom had a red ball", "The cat sat on the mat and",
    "There was a big tree in the park. One day,",
    "Sara and Ben went to the beach. They saw a big wave and",
]

GEN_KINDS = ["completions", "chat", "responses", "messages"]


# ---------------------------------------------------------------------------------------------
# The cluster


class Cluster:
    def __init__(self, build, model, workdir, max_body_bytes, lease_ms, kv_mb):
        self.build, self.model, self.dir = build, model, workdir
        self.kv_mb = kv_mb
        # The router's prefix index remembers up to this many blocks (LRU): the default (2^20,
        # ~100 MB) takes hours of this load to fill, so its RSS would rise through the run.
        self.index_blocks = 16384
        self.procs = {}
        self.ports = {}
        self.max_body_bytes = max_body_bytes
        self.lease_ms = lease_ms

    def _start(self, name, binary, args):
        port_file = os.path.join(self.dir, name + ".port")
        log = open(os.path.join(self.dir, name + ".log"), "w")
        cmd = [os.path.join(self.build, binary), "--model", self.model, "--port-file", port_file] + args
        self.procs[name] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.procs[name].poll() is not None:
                raise RuntimeError(f"{name} exited; see {log.name}")
            try:
                ports = [int(p) for p in open(port_file).read().split()]
                if len(ports) == 2:
                    self.ports[name] = ports
                    return
            except (OSError, ValueError):
                pass
            time.sleep(0.05)
        raise RuntimeError(f"{name} did not start; see {log.name}")

    def start(self):
        self._start("router", "services/router/tandem-router",
                    ["--http-listen", "127.0.0.1:0", "--control-listen", "127.0.0.1:0",
                     "--max-body-bytes", str(self.max_body_bytes),
                     "--routing-index-blocks", str(self.index_blocks),
                     "--worker-lease-ms", str(self.lease_ms)])
        control = f"127.0.0.1:{self.ports['router'][1]}"
        for role in ("prefill", "decode"):
            # Small KV pools (device and host tier): the caches fill during the warm-up, so
            # what the growth check sees after it is leaks, not pools being touched for the
            # first time (the defaults, 256 + 512 MB, take longer than a soak to fill; the
            # router's prefix index is bounded the same way: --routing-index-blocks).
            self._start(role, f"services/{role}/tandem-{role}",
                        ["--router", control, "--threads", "1", "--worker-id", role,
                         "--heartbeat-ms", "200", "--kv-cache-mb", str(self.kv_mb),
                         "--kv-host-mb", str(self.kv_mb)])
        deadline = time.time() + 60
        while time.time() < deadline:
            status, _ = request(self.http_port, "GET", "/ready", None, timeout=5)
            if status == 200:
                return
            time.sleep(0.1)
        raise RuntimeError("router never ready")

    @property
    def http_port(self):
        return self.ports["router"][0]

    def metrics(self, name):
        port = self.ports[name][0] if name == "router" else self.ports[name][1]
        status, body = request(port, "GET", "/metrics", None, timeout=10)
        out = {}
        if status != 200:
            return out
        for line in body.decode(errors="replace").splitlines():
            if not line or line.startswith("#"):
                continue
            key, _, value = line.rpartition(" ")
            try:
                out[key] = float(value)
            except ValueError:
                pass
        return out

    def stop(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def request(port, method, path, body, timeout=120, headers=None):
    """(status, body bytes); status 0 when there was no answer."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        conn.request(method, path, body=body, headers=h)
        r = conn.getresponse()
        return r.status, r.read()
    except (OSError, http.client.HTTPException) as e:
        return 0, str(e).encode()
    finally:
        conn.close()


# ---------------------------------------------------------------------------------------------
# Requests


def gen_body(kind, model, prompt, max_tokens, stream, seeded):
    sampling = {"temperature": 0.8, "seed": random.randrange(1 << 30)} if seeded else {"temperature": 0}
    if kind == "completions":
        b = {"model": model, "prompt": prompt, "max_tokens": max_tokens}
    elif kind == "chat":
        b = {"model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens}
    elif kind == "responses":
        b = {"model": model, "input": prompt, "max_output_tokens": max_tokens}
    else:
        b = {"model": model, "max_tokens": max_tokens, "messages": [{"role": "user", "content": prompt}]}
    b.update(sampling)
    b["stream"] = stream
    return b


PATHS = {"completions": "/v1/completions", "chat": "/v1/chat/completions",
         "responses": "/v1/responses", "messages": "/v1/messages"}


def sse_events(resp):
    """(event name or None, data string) per SSE event, as they arrive. Reads whatever the socket
    has (read1), not line by line: http.client's readline over a chunked body costs a Python
    call per line, and the client shares two cores with the cluster."""
    event, data, buf = None, [], b""
    while True:
        chunk = resp.read1(65536)
        if not chunk:
            return
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for raw in lines:
            line = raw.decode(errors="replace").rstrip("\r")
            if line == "":
                if data:
                    yield event, "\n".join(data)
                event, data = None, []
            elif line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip())


def stream_complete(kind, events):
    """'ok', or why the stream is not a complete answer. Only terminal and error events are
    parsed: the client shares two cores with the cluster, and a JSON parse per token would make
    it the bottleneck."""
    terminal = False
    for event, data in events:
        if kind in ("completions", "chat"):
            if data == "[DONE]":
                terminal = True
            elif '"error"' in data:
                try:
                    if "error" in json.loads(data):
                        return "error event: " + data[:200]
                except ValueError:
                    return "unparseable event: " + data[:200]
            continue
        if event in ("error", "response.failed"):
            return "error event: " + data[:200]
        if kind == "responses" and event in ("response.completed", "response.incomplete"):
            terminal = True
        if kind == "messages" and event == "message_stop":
            terminal = True
    return "ok" if terminal else "stream ended without its terminal event"


def body_complete(kind, body):
    try:
        j = json.loads(body)
    except ValueError:
        return "unparseable body"
    if kind in ("completions", "chat"):
        ok = bool(j.get("choices")) and j["choices"][0].get("finish_reason") is not None
    elif kind == "responses":
        ok = j.get("status") in ("completed", "incomplete")
    else:
        ok = j.get("type") == "message" and j.get("stop_reason") is not None
    return "ok" if ok else "incomplete body: " + body[:200].decode(errors="replace")


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {}
        self.problems = {}  # outcome -> the first few explanations
        self.latencies = []

    def add(self, outcome, problem=None, latency=None):
        with self.lock:
            self.counts[outcome] = self.counts.get(outcome, 0) + 1
            if problem and len(self.problems.setdefault(outcome, [])) < 20:
                self.problems[outcome].append(problem)
            if latency is not None:
                self.latencies.append(latency)


def run_generation(port, model, kind, stream, max_tokens, seeded, stats, action="complete"):
    """action: complete | cancel (close right after sending) | disconnect (after a few events)."""
    body = json.dumps(gen_body(kind, model, random.choice(PROMPTS), max_tokens, stream, seeded))
    label = f"{kind}/{'stream' if stream else 'unary'}"
    start = time.time()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=180)
    try:
        conn.request("POST", PATHS[kind], body=body, headers={"Content-Type": "application/json"})
        if action == "cancel":
            time.sleep(random.uniform(0, 0.05))
            conn.sock.shutdown(socket.SHUT_RDWR)
            stats.add("cancelled")
            return
        r = conn.getresponse()
        if r.status != 200:
            stats.add("lost", f"{label}: HTTP {r.status} {r.read()[:200]!r}")
            return
        if action == "disconnect":
            for i, _ in enumerate(sse_events(r)):
                if i >= 3:
                    break
            conn.sock.shutdown(socket.SHUT_RDWR)
            stats.add("disconnected")
            return
        verdict = stream_complete(kind, sse_events(r)) if stream else body_complete(kind, r.read())
        if verdict == "ok":
            stats.add("served", latency=time.time() - start)
        else:
            stats.add("lost", f"{label}: {verdict}")
    except (OSError, http.client.HTTPException) as e:
        stats.add("lost", f"{label}: {type(e).__name__}: {e}")
    finally:
        conn.close()


def run_bad(port, model, stats, max_body_bytes):
    which = random.choice(["malformed", "oversize", "wrong_type", "out_of_range", "unknown_model"])
    if which == "malformed":
        path, body = "/v1/chat/completions", b'{"messages": [{"role": "user", "content": "hi"'
    elif which == "oversize":
        path = "/v1/completions"
        body = json.dumps({"model": model, "prompt": "x" * (max_body_bytes + 1024)}).encode()
    elif which == "wrong_type":
        path, body = "/v1/messages", json.dumps({"model": model, "max_tokens": "ten",
                                                 "messages": "hello"}).encode()
    elif which == "out_of_range":
        path, body = "/v1/completions", json.dumps({"model": model, "prompt": "hi",
                                                    "max_tokens": -5, "temperature": 9}).encode()
    else:
        path, body = "/v1/responses", json.dumps({"model": "no-such-model", "input": "hi"}).encode()
    status, resp = request(port, "POST", path, body, timeout=60)
    if which == "oversize" and status == 0:
        # The router may answer 413 and close before the whole body is sent; the client then
        # sees a reset instead of the answer. That is a refusal, not a hang.
        stats.add("bad_refused_reset")
        return
    ok = 400 <= status < 500 and status != 429
    # 413 comes from the HTTP layer, before the body is read and the protocol known: plain text.
    if ok and which != "oversize":
        try:
            json.loads(resp)
        except ValueError:
            ok = False
    stats.add("bad_rejected" if ok else "bad_unexpected",
              None if ok else f"bad request {which}: HTTP {status} {resp[:200]!r}")


# The mix, by weight: generations (streaming and not, all protocols) dominate.
def pick_action():
    x = random.random()
    if x < 0.08:
        return "cancel"
    if x < 0.16:
        return "disconnect"
    if x < 0.24:
        return "bad"
    return "complete"


def fire(port, model, stats, max_body_bytes, max_tokens_range):
    action = pick_action()
    if action == "bad":
        run_bad(port, model, stats, max_body_bytes)
        return
    kind = random.choice(GEN_KINDS)
    stream = action == "disconnect" or random.random() < 0.6
    run_generation(port, model, kind, stream, random.randint(*max_tokens_range),
                   random.random() < 0.3, stats, action)


# ---------------------------------------------------------------------------------------------
# Capacity and load


def measure_capacity(port, model, seconds, concurrency, max_body_bytes, max_tokens_range):
    """Requests of the mix answered per second by a closed loop of `concurrency` clients (the
    same mix as the load, so its cancellations, bad requests and client costs are included)."""
    stats = Stats()
    stop = time.time() + seconds

    def loop():
        while time.time() < stop:
            fire(port, model, stats, max_body_bytes, max_tokens_range)

    threads = [threading.Thread(target=loop) for _ in range(concurrency)]
    start = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(stats.counts.values()) / (time.time() - start), stats


def sample_process(pid):
    try:
        status = open(f"/proc/{pid}/status").read()
        rss = threads = 0
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        return {"rss": rss, "fds": fds, "threads": threads}
    except OSError:
        return None


KV_GAUGES = {
    "free": 'tandem_worker_kv_free_blocks{role="%s",worker="%s"}',
    "total": 'tandem_worker_kv_total_blocks{role="%s",worker="%s"}',
    "reserved": 'tandem_worker_kv_reserved_blocks{role="%s",worker="%s"}',
    "handoffs": 'tandem_worker_kv_active_handoffs{role="%s",worker="%s"}',
    "active": 'tandem_worker_active_requests{role="%s",worker="%s"}',
}


def gauge(metrics, pattern_name, role):
    key = KV_GAUGES[pattern_name] % (role, role)
    if key in metrics:
        return metrics[key]
    # Label order is the exporter's business: match by name and labels.
    name = key.split("{")[0]
    for k, v in metrics.items():
        if k.startswith(name + "{") and f'worker="{role}"' in k:
            return v
    return None


def take_sample(cluster, t0):
    s = {"t": round(time.time() - t0, 1)}
    for name, p in cluster.procs.items():
        ps = sample_process(p.pid)
        if ps is None:
            s[name + ".alive"] = 0
            continue
        for k, v in ps.items():
            s[f"{name}.{k}"] = v
    for role in ("prefill", "decode"):
        m = cluster.metrics(role)
        for g in KV_GAUGES:
            v = gauge(m, g, role)
            if v is not None:
                s[f"{role}.kv_{g}"] = v
    rm = cluster.metrics("router")
    for k in ("tandem_router_active_requests", "tandem_router_queue_depth",
              "tandem_router_active_streams"):
        if k in rm:
            s["router." + k.replace("tandem_router_", "")] = rm[k]
    return s


def growth_failures(samples, warmup, rss_rel, rss_abs, count_rel, count_slack):
    """Each process metric whose last-quarter median exceeds its first-quarter maximum by more
    than the tolerance, after the warm-up samples."""
    after = [s for s in samples if s["t"] >= warmup]
    failures, report = [], {}
    if len(after) < 8:
        return [f"only {len(after)} samples after the warm-up: run longer"], report
    q = len(after) // 4
    first, last = after[:q], after[-q:]
    keys = sorted({k for s in after for k in s if k.split(".")[-1] in ("rss", "fds", "threads")})
    for k in keys:
        a = [s[k] for s in first if k in s]
        b = [s[k] for s in last if k in s]
        if not a or not b:
            continue
        base, end = max(a), statistics.median(b)
        if k.endswith(".rss"):
            limit = base * (1 + rss_rel) + rss_abs
        else:
            limit = base * (1 + count_rel) + count_slack
        report[k] = {"first_quarter_median": statistics.median(a), "first_quarter_max": base,
                     "last_quarter_median": end, "limit": limit}
        if end > limit:
            failures.append(f"{k} grew: last-quarter median {end:.0f} > limit {limit:.0f} "
                            f"(first-quarter max {base:.0f})")
    return failures, report


def wait_idle(cluster, timeout):
    """Empty when the cluster returned to idle within `timeout`, else what is still held."""
    deadline = time.time() + timeout
    problems = []
    while time.time() < deadline:
        problems = []
        for role in ("prefill", "decode"):
            m = cluster.metrics(role)
            free, total = gauge(m, "free", role), gauge(m, "total", role)
            if free != total:
                problems.append(f"{role}: {free} of {total} KV blocks free")
            for g in ("reserved", "handoffs", "active"):
                v = gauge(m, g, role)
                if v:
                    problems.append(f"{role}: {g} = {v}")
        rm = cluster.metrics("router")
        for k in ("tandem_router_active_requests", "tandem_router_queue_depth"):
            if rm.get(k):
                problems.append(f"router: {k} = {rm[k]}")
        if not problems:
            return []
        time.sleep(0.5)
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--model", default=os.path.join(ROOT, "..", "shared", "models", "stories260K"))
    ap.add_argument("--duration", type=float, default=1800, help="seconds of mixed load")
    ap.add_argument("--warmup", type=float, default=180,
                    help="seconds of the load before growth is measured (allocator arenas, "
                         "gRPC thread pools and caches settle)")
    ap.add_argument("--load", type=float, default=0.8, help="fraction of the measured capacity")
    ap.add_argument("--capacity-seconds", type=float, default=30)
    ap.add_argument("--capacity-clients", type=int, default=0,
                    help="closed-loop clients while measuring capacity (default: --clients; "
                         "on two shared cores throughput falls as concurrency rises, so the "
                         "capacity is measured at the concurrency the load may reach)")
    ap.add_argument("--kv-mb", type=int, default=32,
                    help="each worker's --kv-cache-mb and --kv-host-mb")
    ap.add_argument("--clients", type=int, default=48, help="client threads of the open loop")
    ap.add_argument("--rate", type=float, default=0,
                    help="requests/s to drive instead of --load x the measured capacity")
    ap.add_argument("--max-tokens", default="16,192", help="range of max_tokens per generation")
    ap.add_argument("--sample", type=float, default=5, help="seconds between samples")
    ap.add_argument("--max-body-bytes", type=int, default=262144,
                    help="the router's body limit (an oversize request is a bit above it)")
    ap.add_argument("--rss-tolerance", type=float, default=0.05,
                    help="relative RSS growth allowed (plus --rss-slack-mb)")
    ap.add_argument("--rss-slack-mb", type=float, default=8)
    ap.add_argument("--count-tolerance", type=float, default=0.25,
                    help="relative growth of fds / threads over the first quarter's maximum "
                         "(they follow the requests in flight, which follow the machine's load)")
    ap.add_argument("--count-slack", type=int, default=8,
                    help="fds / threads allowed above the tolerance")
    ap.add_argument("--idle-slack", type=int, default=4,
                    help="fds / threads allowed above the idle values before the load")
    ap.add_argument("--out", default=None, help="directory for samples.jsonl and summary.json")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    random.seed(args.seed)
    mt = tuple(int(x) for x in args.max_tokens.split(","))

    workdir = tempfile.mkdtemp(prefix="tandem-soak-")
    out = args.out or workdir
    os.makedirs(out, exist_ok=True)
    cluster = Cluster(args.build_dir, args.model, workdir, args.max_body_bytes, 3000, args.kv_mb)
    failures = []
    try:
        cluster.start()
        status, models = request(cluster.http_port, "GET", "/v1/models", None)
        model = json.loads(models)["data"][0]["id"]
        print(f"cluster up (logs in {workdir}); model {model}", flush=True)

        capacity, cap_stats = measure_capacity(cluster.http_port, model, args.capacity_seconds,
                                               args.capacity_clients or args.clients,
                                               args.max_body_bytes, mt)
        idle_problems = wait_idle(cluster, 60)
        if idle_problems:
            failures.append(f"not idle after the capacity run: {idle_problems}")
        time.sleep(5)  # thread pools shrink, connections close
        idle_before = take_sample(cluster, time.time())
        if cap_stats.counts.get("lost"):
            failures.append(f"{cap_stats.counts['lost']} requests lost while measuring capacity: "
                            f"{cap_stats.problems['lost'][:3]}")
        rate = args.rate if args.rate else capacity * args.load
        print(f"capacity {capacity:.2f} requests/s of the mix; driving {rate:.2f} requests/s "
              f"({args.load:.0%}) for {args.duration:.0f} s", flush=True)

        stats = Stats()
        samples = []
        t0 = time.time()
        stop = threading.Event()

        def sampler():
            while not stop.is_set():
                samples.append(take_sample(cluster, t0))
                stop.wait(args.sample)

        st = threading.Thread(target=sampler)
        st.start()
        # Open loop: arrivals are Poisson at `rate` whatever the latency, served by a pool of
        # client threads (one thread per request would make the Python client itself the
        # bottleneck: hundreds of threads fighting for the GIL read streams late, the router
        # sees slow clients and queues). A request that waits for a free client thread is
        # counted (client_backlog_max): the pool, not the cluster, was the limit then.
        jobs = queue.Queue()
        backlog = {"max": 0}

        def client():
            while True:
                job = jobs.get()
                if job is None:
                    return
                backlog["max"] = max(backlog["max"], jobs.qsize())
                fire(cluster.http_port, model, stats, args.max_body_bytes, mt)

        workers = [threading.Thread(target=client, daemon=True) for _ in range(args.clients)]
        for w in workers:
            w.start()
        next_at = time.time()
        end = t0 + args.duration
        last_report = t0
        while time.time() < end:
            now = time.time()
            if now < next_at:
                time.sleep(min(next_at - now, 0.5))
                continue
            next_at += random.expovariate(rate)
            jobs.put(1)
            if now - last_report > 60:
                last_report = now
                print(f"  t={now - t0:5.0f}s waiting for a client thread {jobs.qsize():3d} "
                      f"{dict(sorted(stats.counts.items()))}", flush=True)
                if stats.problems.get("lost"):
                    print(f"    first lost: {stats.problems['lost'][:2]}", flush=True)
        for _ in workers:
            jobs.put(None)
        for t in workers:
            t.join(timeout=300)
        stop.set()
        st.join()
        samples.append(take_sample(cluster, t0))

        # Abandoned KV reservations whose prefill never wrote stay quarantined for their lease
        # (30 s): idle may take that long.
        idle_problems = wait_idle(cluster, 90)
        time.sleep(5)
        idle_after = take_sample(cluster, t0)
        samples.append(idle_after)
        with open(os.path.join(out, "samples.jsonl"), "w") as f:
            for s in samples:
                f.write(json.dumps(s) + "\n")

        lost = stats.counts.get("lost", 0)
        if lost:
            failures.append(f"{lost} requests lost: {stats.problems['lost'][:5]}")
        if stats.counts.get("bad_unexpected"):
            failures.append(f"{stats.counts['bad_unexpected']} bad requests not refused with a 4xx: "
                            f"{stats.problems['bad_unexpected'][:3]}")
        for name, p in cluster.procs.items():
            if p.poll() is not None:
                failures.append(f"{name} exited with {p.returncode}")
        growth, growth_report = growth_failures(samples[:-2], args.warmup, args.rss_tolerance,
                                                args.rss_slack_mb * 2**20, args.count_tolerance,
                                                args.count_slack)
        failures += growth
        # Idle before the load and idle after it: what the load left behind. Exact up to a few
        # fds (a metrics scrape's own connection) and threads (pools that shrink lazily).
        leftovers = {}
        for k, v in idle_before.items():
            kind = k.split(".")[-1]
            if kind not in ("fds", "threads") or k not in idle_after:
                continue
            leftovers[k] = {"idle_before": v, "idle_after": idle_after[k]}
            if idle_after[k] > v + args.idle_slack:
                failures.append(f"{k}: {idle_after[k]} when idle after the load, {v} before it")
        failures += [f"not idle after the load: {p}" for p in idle_problems]
        lat = sorted(stats.latencies)
        summary = {
            "duration_s": args.duration, "capacity_per_s": capacity, "rate_per_s": rate,
            "client_backlog_max": backlog["max"],
            "counts": stats.counts, "samples": len(samples),
            "latency_s": {"p50": lat[len(lat) // 2] if lat else None,
                          "p99": lat[int(len(lat) * 0.99)] if lat else None},
            "growth": growth_report, "idle_before_after": leftovers, "final": samples[-1],
            "failures": failures,
        }
        with open(os.path.join(out, "summary.json"), "w") as f:
            json.dump(summary, f, indent=1)
        print(json.dumps({k: summary[k] for k in ("capacity_per_s", "rate_per_s", "counts", "latency_s",
                                                  "client_backlog_max")}))
        for k, v in growth_report.items():
            unit = 2**20 if k.endswith(".rss") else 1
            print(f"  {k:22s} first quarter median {v['first_quarter_median'] / unit:9.1f} "
                  f"max {v['first_quarter_max'] / unit:9.1f}  last quarter median "
                  f"{v['last_quarter_median'] / unit:9.1f}  limit {v['limit'] / unit:9.1f}"
                  f"{'  (MiB)' if unit > 1 else ''}")
        for k, v in leftovers.items():
            print(f"  {k:22s} idle before the load {v['idle_before']:5.0f}, after {v['idle_after']:5.0f}")
        print(f"samples and summary in {out}")
    except Exception as e:  # a harness failure is a failure, with its cause
        failures.append(f"{type(e).__name__}: {e}")
    finally:
        cluster.stop()
    if failures:
        print("SOAK FAILED:\n  " + "\n  ".join(failures))
        return 1
    print("SOAK PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
