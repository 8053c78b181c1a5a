"""tandem-bench checks: trace validation, prompt synthesis, and a run against a stdlib fake
OpenAI server. Run: python -m pytest tests/perf/bench (no third-party packages needed)."""

import io
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import tandem_bench
import workload

SHARED = Path(os.environ.get("TANDEM_SHARED_DIR", Path(__file__).resolve().parents[4] / "shared"))


def test_malformed_trace_lines_are_reported_with_line_numbers_and_skipped(tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_text("\n".join([
        '{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]}',
        '{"timestamp": 1, "input_length": 600, "output_length": 5, "hash_ids": [1]}',
        'not json',
        '{"timestamp": -1, "input_length": 10, "output_length": 5, "hash_ids": [1]}',
        '{"timestamp": 2, "input_length": 10, "output_length": 5}',
        '{"timestamp": 3, "input_length": 10, "output_length": 5, "hash_ids": [7]}',
    ]) + "\n")
    log = io.StringIO()
    rows = workload.read_trace(trace, 512, log=log)
    assert [r["timestamp"] for r in rows] == [0, 3]
    messages = log.getvalue().splitlines()
    assert [m.split(":")[1] for m in messages] == ["2", "3", "4", "5"]
    assert "expected 2 blocks" in messages[0]
    assert "missing 'hash_ids'" in messages[3]


def test_lines_python_cannot_hold_are_skipped_not_fatal(tmp_path):
    # Found by tests/fuzz/bench_trace_fuzz.py: each of these used to raise out of read_trace.
    trace = tmp_path / "t.jsonl"
    trace.write_text("\n".join([
        '{"timestamp": 1' + "0" * 400 + ', "input_length": 1, "output_length": 1, "hash_ids": [1]}',
        '{"timestamp": 0, "input_length": 1' + "0" * 5000 + ', "output_length": 1, "hash_ids": [1]}',
        "[" * 100000,
        '{"timestamp": 0, "input_length": 1, "output_length": 99999999999, "hash_ids": [1]}',
        '{"timestamp": 4, "input_length": 10, "output_length": 5, "hash_ids": [7]}',
    ]) + "\n")
    log = io.StringIO()
    rows = workload.read_trace(trace, 512, log=log)
    assert [r["timestamp"] for r in rows] == [4]
    assert [m.split(":")[1] for m in log.getvalue().splitlines()] == ["1", "2", "3", "4"]
    assert len(workload.trace_requests(rows, 512, 16, 1.0, 1.0, 100)) == 1


def test_equal_hash_ids_give_equal_text_and_lengths_follow_the_trace():
    vocab = workload.plain_vocabulary()
    rows = [{"timestamp": 0, "input_length": 1024, "output_length": 9, "hash_ids": [5, 6]},
            {"timestamp": 2000, "input_length": 768, "output_length": 9, "hash_ids": [5, 8]}]
    a, b = workload.trace_requests(rows, 512, 16, time_scale=2, output_scale=1, max_output=4)
    assert (a.input_tokens, b.input_tokens) == (32, 24)
    assert b.arrival_s == pytest.approx(1.0)
    assert a.output_tokens == 4
    pa, pb = vocab.prompt(a, 16).split(), vocab.prompt(b, 16).split()
    assert (len(pa), len(pb)) == (32, 24)
    assert pa[:16] == pb[:16]   # hash id 5 in both
    assert pa[16:] != pb[16:24]


@pytest.mark.skipif(not (SHARED / "models/stories260K/tokenizer.bin").exists(),
                    reason="needs ../shared/models/stories260K")
def test_stories260k_words_are_single_tokens():
    vocab = workload.llama2c_vocabulary(SHARED / "models/stories260K/tokenizer.bin")
    assert "Once" in vocab.words and "upon" in vocab.words
    assert all(w.isalpha() for w in vocab.words)


class FakeOpenAi(BaseHTTPRequestHandler):
    """Streams 3 tokens; reports half the prompt words as cached."""

    def log_message(self, *args):
        pass

    def do_GET(self):
        body = json.dumps({"data": [{"id": "fake"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if request["prompt"].startswith("fail"):
            self.send_response(503)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"no")
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def send(obj):
            data = f"data: {obj}\n\n".encode()
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        words = len(request["prompt"].split())
        for t in ["a", "b", "c"][:request["max_tokens"]]:
            time.sleep(0.01)
            send(json.dumps({"choices": [{"text": t}]}))
        send(json.dumps({"choices": [], "usage": {
            "prompt_tokens": words, "completion_tokens": 3,
            "prompt_tokens_details": {"cached_tokens": words // 2}}}))
        send("[DONE]")
        self.wfile.write(b"0\r\n\r\n")


def test_a_fixed_poisson_run_measures_latencies_hits_and_throughput(tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeOpenAi)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        out = tmp_path / "run.json"
        rc = tandem_bench.main(["run", "--url", f"http://127.0.0.1:{server.server_port}", "--fixed",
                                "--num-requests", "8", "--input-tokens", "20",
                                "--output-tokens", "3", "--rate", "50", "--out", str(out)])
        assert rc == 0
        data = json.loads(out.read_text())
        s = data["summary"]
        assert (s["succeeded"], s["failed"]) == (8, 0)
        assert s["hit_rate"] == pytest.approx(0.5)
        assert 0.01 <= s["ttft_p50"] < 1.0
        assert s["itl_p50"] >= 0.005
        assert s["e2e_p99"] >= s["ttft_p99"]
        assert all(len(r["itl_s"]) == 2 for r in data["requests"])
        sent = [r["sent_s"] for r in data["requests"]]
        assert sent == sorted(sent) and sent[-1] > 0.02  # spread by the Poisson arrivals
    finally:
        server.shutdown()


def _recording_server():
    """A FakeOpenAi whose handler class keeps this server's requests (one list per server)."""
    seen = []

    class Recording(FakeOpenAi):
        def do_POST(self):
            length = int(self.headers["Content-Length"])
            body = self.rfile.read(length)
            seen.append(json.loads(body))
            self.rfile = io.BytesIO(body)
            super().do_POST()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Recording)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


def test_emit_trace_writes_the_workload_sent_in_mooncake_format(tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_text("\n".join(json.dumps(r) for r in [
        {"timestamp": 0, "input_length": 1024, "output_length": 300, "hash_ids": [5, 6]},
        {"timestamp": 100, "input_length": 700, "output_length": 50, "hash_ids": [5, 9]},
        {"timestamp": 150, "input_length": 3000, "output_length": 50,
         "hash_ids": [1, 2, 3, 4, 7, 8]},   # over --max-input-tokens: not sent, not emitted
        {"timestamp": 300, "input_length": 100, "output_length": 1000, "hash_ids": [11]},
    ]) + "\n")
    server, seen = _recording_server()
    try:
        emitted = tmp_path / "sent.jsonl"
        rc = tandem_bench.main(["run", "--url", f"http://127.0.0.1:{server.server_port}",
                                "--trace", str(trace), "--time-scale", "2", "--block-tokens", "16",
                                "--output-scale", "0.01", "--max-output-tokens", "3",
                                "--max-input-tokens", "60", "--out", str(tmp_path / "run.json"),
                                "--emit-trace", str(emitted)])
        assert rc == 0
    finally:
        server.shutdown()
    rows = [json.loads(line) for line in emitted.read_text().splitlines()]
    # The emitted file is a valid trace of 16-token blocks (tandem-sim --block-size 16).
    assert workload.read_trace(emitted, 16, log=io.StringIO()) == rows
    assert [r["timestamp"] for r in rows] == [0, 50, 150]  # ms after x2 compression
    assert [r["hash_ids"] for r in rows] == [[5, 6], [5, 9], [11]]
    # What the server received, request by request, in arrival order.
    by_prompt = {r["prompt"]: r for r in seen}
    sent = [by_prompt[workload.plain_vocabulary().prompt(
        workload.BenchRequest(0, row["input_length"], 0, row["hash_ids"]), 16)] for row in rows]
    assert [len(s["prompt"].split()) for s in sent] == [r["input_length"] for r in rows]
    assert [r["input_length"] for r in rows] == [32, 22, 3]
    assert [s["max_tokens"] for s in sent] == [r["output_length"] for r in rows] == [3, 1, 3]
    # Equal first ids are equal first 16 prompt tokens, as the simulator will assume.
    assert sent[0]["prompt"].split()[:16] == sent[1]["prompt"].split()[:16]
    assert sent[0]["prompt"].split()[16:] != sent[1]["prompt"].split()[16:22]


def test_emit_trace_gives_fixed_prompts_one_unshared_id_per_block(tmp_path):
    server, _ = _recording_server()
    try:
        emitted = tmp_path / "sent.jsonl"
        rc = tandem_bench.main(["run", "--url", f"http://127.0.0.1:{server.server_port}", "--fixed",
                                "--num-requests", "4", "--input-tokens", "40",
                                "--output-tokens", "2", "--block-tokens", "16",
                                "--out", str(tmp_path / "run.json"), "--emit-trace", str(emitted)])
        assert rc == 0
    finally:
        server.shutdown()
    rows = workload.read_trace(emitted, 16, log=io.StringIO())
    assert len(rows) == 4
    assert all((r["input_length"], r["output_length"], len(r["hash_ids"])) == (40, 2, 3)
               for r in rows)
    ids = [i for r in rows for i in r["hash_ids"]]
    assert len(set(ids)) == len(ids)


def test_calibration_fit_recovers_costs_and_never_returns_a_negative_one():
    import calibrate_sim
    # The probes' design: cold prompts (all tokens computed) and warm repeats (one token).
    cold = [[1.0, n, -(-n // 16)] for n in (17, 65, 129, 225, 321, 449)]
    rows = cold + [[1.0, 1, b] for _, _, b in cold]
    costs = calibrate_sim.least_squares(rows, [0.006 + 6e-5 * n + 3e-4 * b for _, n, b in rows])
    assert costs == pytest.approx([0.006, 6e-5, 3e-4], rel=1e-6)
    # A cost that would come out negative is dropped and the rest refitted.
    costs = calibrate_sim.least_squares(rows, [0.006 - 1e-5 * n + 3e-4 * b for _, n, b in rows])
    assert costs[1] == 0 and costs[0] > 0 and costs[2] > 0
    # Cold prompts alone cannot tell tokens from blocks (n = 16 x blocks - 15): a fit, no crash.
    costs = calibrate_sim.least_squares(cold, [0.006 + 6e-5 * n for _, n, _ in cold])
    assert [costs[0] + costs[1] * n + costs[2] * b for _, n, b in cold] == pytest.approx(
        [0.006 + 6e-5 * n for _, n, _ in cold], rel=1e-3)


@pytest.mark.skipif(not (SHARED / "models/stories260K/model.bin").exists(),
                    reason="needs ../shared/models/stories260K")
def test_calibration_kv_pool_matches_the_workers_block_count():
    import calibrate_sim
    # 16 MiB of fp32 K+V, 5 layers x 4 KV heads x 8 dims x 16 tokens: 819 blocks, as the workers
    # report (docs/routing.md, real-cluster replay).
    assert calibrate_sim.kv_pool_blocks(SHARED / "models/stories260K/model.bin", 16) == 819
