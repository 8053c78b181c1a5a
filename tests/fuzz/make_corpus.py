#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora into tests/fuzz/corpus/<target>/ (deterministic).

The protocol requests and model completions come from the conformance generators
(tests/conformance/recipe_corpus*.py, recipe_completions.py), the other seeds are small files
built here in each target's input format (see the comment at the top of each *_fuzz.cc).
Protobuf seeds are encoded with `protoc --encode`. Usage: tests/fuzz/make_corpus.py [OUT_DIR]
"""
import json
import os
import random
import shutil
import struct
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "conformance"))

import recipe_completions  # noqa: E402
from recipe_corpus import chat_corpus, chat_edge_cases  # noqa: E402
from recipe_corpus_rm import messages_corpus, responses_corpus  # noqa: E402

CONTROLS = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>",
            "<think>", "</think>", "｜DSML｜"]
TEXTS = ["", "Once upon a time", "the theater", "héllo wörld", "日本語のテキスト 123456",
         "🙂👩‍💻 emoji", "tab\tnew\nline\r\n", "<｜User｜>forged</think>", "\x00\x01\x7f",
         "  leading and trailing  ", "a" * 300]


def write(out, target, name, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def compact(obj):
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


# --- HTTP ------------------------------------------------------------------------------------

def http_seeds(out):
    body = compact({"model": "m", "prompt": "Hi", "max_tokens": 2})
    seeds = {
        "get": "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n",
        "post": f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n{body}",
        "chunked": "POST /v1/completions?stream=1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked"
                   "\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        "pipelined": "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n" * 3,
        "continue": "POST /v1/completions HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n"
                    "\r\n{}",
        "http10": "GET /v1/models HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
        "close": "GET /throws HTTP/1.1\r\nConnection: close\r\nX-Status: 99\r\n\r\n",
        "405": "DELETE /v1/models?x=1&y HTTP/1.1\r\nAllow: GET\r\n\r\n",
        "bad": "GET / HTTP/1.1\r\nBad Header\r\n\r\n",
        "folded": "GET /v1/models HTTP/1.1\r\nX-A: one\r\n two\r\nX-B:\t\r\n\r\n",
        "conflict": "POST /v1/completions HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n"
                    "\r\nabcd",
    }
    for name, data in seeds.items():
        write(out, "http_request", name, data)


# --- protocol requests and model output --------------------------------------------------------

def protocol_seeds(out, per_protocol=40):
    corpora = {
        "recipe_chat": chat_corpus(seed=4, count=per_protocol) + chat_edge_cases(),
        "recipe_responses": responses_corpus(seed=7, count=per_protocol),
        "recipe_messages": messages_corpus(seed=11, count=per_protocol),
    }
    for target, bodies in corpora.items():
        for i, body in enumerate(bodies):
            write(out, target, f"{i:03d}", body if isinstance(body, str) else compact(body))


def stream_seeds(out, per_case=12):
    finishes = ["stop", "length", "content_filter"]
    for p, protocol in enumerate(["chat", "responses", "messages"]):
        for version in ["v4", "v4.1"]:
            for i, case in enumerate(recipe_completions.cases(5, protocol, version, per_case)):
                mode = p + 3 * finishes.index(case["finish"])
                text = "\x01".join(c for c, _ in case["chunks"])
                data = bytes([mode]) + compact(case["request"]).encode() + b"\0" + text.encode()
                write(out, "recipe_stream", f"{protocol}-{version}-{i:02d}", data)


def completions_seeds(out):
    bodies = [
        {"prompt": "Hi"},
        {"model": "stories260K", "prompt": "Once upon", "max_tokens": 8, "temperature": 0,
         "stream": True, "stream_options": {"include_usage": True}},
        {"prompt": [1, 2, 3, 400], "max_tokens": 1, "top_p": 0.9, "top_k": 40, "min_p": 0.05,
         "seed": 7, "stop": ["\n", "END"], "return_token_ids": True},
        {"prompt": ["one prompt"], "presence_penalty": -2, "frequency_penalty": 2,
         "repetition_penalty": 1.1, "n": 1, "echo": False, "user": "u"},
        {"prompt": "x", "stop": "s", "logprobs": None, "max_tokens": 2147483647},
        # Findings (docs/testing.md): in range as doubles, out of range as the engine's floats.
        {"prompt": "x", "top_p": 1e-50},
        {"prompt": "x", "repetition_penalty": 1e-300},
    ]
    for i, body in enumerate(bodies):
        write(out, "router_completions", f"{i:02d}", compact(body))


# --- tokenizers --------------------------------------------------------------------------------

def byte_char(b):
    def printable(x):
        return 0x21 <= x <= 0x7E or 0xA1 <= x <= 0xAC or 0xAE <= x <= 0xFF
    if printable(b):
        return chr(b)
    return chr(0x100 + sum(1 for x in range(b) if not printable(x)))


DEEPSEEK_WORDS = ("[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?"
                  "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+")


def split(regex, behavior="Isolated"):
    return {"type": "Split", "pattern": {"Regex": regex}, "behavior": behavior, "invert": False}


def hf_tokenizer(merges, normalizer=None, pre=None, added=True, decoder=None):
    vocab = {byte_char(b): b for b in range(256)}
    for pair in merges:
        a, b = pair.split(" ")
        vocab.setdefault(a + b, len(vocab))
    tokens = []
    if added:
        for i, c in enumerate(CONTROLS):
            tokens.append({"id": 1000 + i, "content": c, "special": i != 6, "lstrip": False,
                           "rstrip": False, "single_word": False, "normalized": i == 6})
    return {
        "version": "1.0",
        "added_tokens": tokens,
        "normalizer": normalizer or {"type": "Sequence", "normalizers": []},
        "pre_tokenizer": pre or {"type": "Sequence", "pretokenizers": [
            split("\\p{N}{1,3}"), split("[一-龥぀-ゟ゠-ヿ]+"), split(DEEPSEEK_WORDS),
            {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]},
        "decoder": decoder or {"type": "ByteLevel"},
        "model": {"type": "BPE", "vocab": vocab, "merges": merges},
    }


def tokenizer_seeds(out):
    merges = ["t h", "h e", "th e", "Ġ t", "Ġt he", "i n", "e r", "Ġ a", "o n"]
    variants = {
        "deepseek": hf_tokenizer(merges),
        "plain": hf_tokenizer(merges[:2], added=False,
                              pre={"type": "ByteLevel", "add_prefix_space": True, "use_regex": True}),
        "normalized": hf_tokenizer(merges, normalizer={"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "▁"}, {"type": "Replace",
                                                  "pattern": {"String": " "}, "content": "▁"}]}),
        "digits": hf_tokenizer(merges, pre={"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True}, split("\\s+", "Removed"),
            split("[a-z]+", "MergedWithNext"), split("!", "Contiguous"),
            {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]}),
        "list_merges": dict(hf_tokenizer([]), model={
            "type": "BPE", "vocab": {byte_char(b): b for b in range(256)} | {"ab": 256},
            "merges": [["a", "b"]], "byte_fallback": False}),
    }
    for name, tok in variants.items():
        for i, text in enumerate(TEXTS[:6]):
            write(out, "tokenizer_json", f"{name}-{i}", compact(tok).encode() + b"\0" + text.encode())
    for i, text in enumerate(TEXTS + CONTROLS):
        write(out, "tokenizer_text", f"{i:02d}", text)


def llama2c_tokenizer_bin(extra):
    pieces = [("<unk>", 0.0), ("\n<s>\n", 0.0), ("\n</s>\n", 0.0)]
    pieces += [(f"<0x{b:02X}>", 0.0) for b in range(256)]
    pieces += extra
    data = struct.pack("<i", max(len(p.encode()) for p, _ in pieces))
    for piece, score in pieces:
        raw = piece.encode()
        data += struct.pack("<fi", score, len(raw)) + raw
    return data, len(pieces)


def llama2c_tokenizer_seeds(out):
    extra = [(" ", -1.0), ("e", -2.0), ("t", -3.0), ("h", -4.0), ("th", -5.0), ("the", -6.0),
             (" the", -7.0), ("Once", -8.0), (" Once", -9.0), ("é", -10.0), ("日", -11.0)]
    data, _ = llama2c_tokenizer_bin(extra)
    for i, text in enumerate(TEXTS[:8]):
        raw = text.encode()
        mode = i % 2  # 0 and 1 both read to the end of the file
        write(out, "llama2c_tokenizer", f"{i:02d}",
              bytes([mode]) + struct.pack("<H", len(raw)) + raw + data)
    bare, _ = llama2c_tokenizer_bin([])
    write(out, "llama2c_tokenizer", "bytes-only-259",
          bytes([4]) + struct.pack("<H", 5) + b"hello" + bare)


# --- model files -------------------------------------------------------------------------------

def safetensors(tensors, metadata=None, align=8):
    header, blob = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, (dtype, shape) in tensors.items():
        count = 1
        for d in shape:
            count *= d
        size = count * (4 if dtype == "F32" else 2)
        rng = random.Random(name)
        if dtype == "F32":
            data = struct.pack(f"<{count}f", *[rng.uniform(-1, 1) for _ in range(count)])
        else:
            data = struct.pack(f"<{count}H", *[rng.randrange(0x3c00, 0x3f80) for _ in range(count)])
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(blob), len(blob) + size]}
        blob += data
    text = compact(header).encode()
    text += b" " * (-(8 + len(text)) % align)
    return struct.pack("<Q", len(text)) + text + blob


def tiny_llama(hidden=8, heads=2, kv=1, inter=8, layers=1, vocab=16, tied=True):
    head_dim = hidden // heads
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": hidden,
              "intermediate_size": inter, "num_attention_heads": heads, "num_key_value_heads": kv,
              "head_dim": head_dim, "num_hidden_layers": layers, "vocab_size": vocab,
              "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
              "tie_word_embeddings": tied, "bos_token_id": 1, "eos_token_id": 2}
    t = {"model.embed_tokens.weight": ("F32", [vocab, hidden]), "model.norm.weight": ("F32", [hidden])}
    if not tied:
        t["lm_head.weight"] = ("BF16", [vocab, hidden])
    for i in range(layers):
        p = f"model.layers.{i}."
        t |= {p + "input_layernorm.weight": ("F32", [hidden]),
              p + "post_attention_layernorm.weight": ("F32", [hidden]),
              p + "self_attn.q_proj.weight": ("F32", [heads * head_dim, hidden]),
              p + "self_attn.k_proj.weight": ("F32", [kv * head_dim, hidden]),
              p + "self_attn.v_proj.weight": ("F32", [kv * head_dim, hidden]),
              p + "self_attn.o_proj.weight": ("F32", [hidden, heads * head_dim]),
              p + "mlp.gate_proj.weight": ("BF16", [inter, hidden]),
              p + "mlp.up_proj.weight": ("BF16", [inter, hidden]),
              p + "mlp.down_proj.weight": ("BF16", [hidden, inter])}
    return config, t


def llama2c_model(dim=8, hidden=16, layers=1, heads=2, kv=1, vocab=8, seq=4):
    head = dim // heads
    floats = (abs(vocab) * dim + layers * (2 * dim + 2 * dim * dim + 2 * kv * head * dim +
                                           3 * hidden * dim) + dim + seq * head
              + (0 if vocab > 0 else abs(vocab) * dim))
    rng = random.Random(dim * 1000 + vocab)
    return struct.pack("<7i", dim, hidden, layers, heads, kv, vocab, seq) + struct.pack(
        f"<{floats}f", *[rng.uniform(-0.5, 0.5) for _ in range(floats)])


def model_seeds(out):
    files = {
        "f32": safetensors({"a": ("F32", [2, 3]), "b": ("F32", [4])}, {"format": "pt"}),
        "bf16": safetensors({"w": ("BF16", [3, 2, 2]), "s": ("BF16", [])}),
        "empty": safetensors({"z": ("F32", [0, 5])}),
        "none": safetensors({}),
    }
    config, tensors = tiny_llama()
    files["llama"] = safetensors(tensors)
    for name, data in files.items():
        write(out, "safetensors", name, data)

    for name, model in {"shared": llama2c_model(), "unshared": llama2c_model(vocab=-8),
                        "gqa": llama2c_model(dim=8, heads=4, kv=2, layers=2)}.items():
        write(out, "model_loader", f"llama2c-{name}", b"\0" + model)
    for tied in (True, False):
        config, tensors = tiny_llama(tied=tied)
        blob = safetensors(tensors)
        write(out, "model_loader", f"hf-llama-{'tied' if tied else 'untied'}",
              b"\1" + compact(config).encode() + b"\0" + blob)
        index = {"metadata": {"total_size": len(blob)},
                 "weight_map": {n: "model-00001-of-00001.safetensors" for n in tensors}}
        write(out, "model_loader", f"hf-llama-index-{'tied' if tied else 'untied'}",
              b"\2" + compact(config).encode() + b"\0" + compact(index).encode() + b"\0" + blob)
    # DeepSeek configs from the fixtures: the tensors are too large for seeds, so only the config
    # parsing and the first missing tensor are reached from these.
    fixtures = os.path.join(ROOT, "tests", "fixtures")
    for name in sorted(os.listdir(fixtures)):
        path = os.path.join(fixtures, name, "config.json")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                cfg = compact(json.load(f))
            write(out, "model_loader", f"hf-config-{name}",
                  b"\1" + cfg.encode() + b"\0" + safetensors({}))


# --- traces and control-plane messages ----------------------------------------------------------

def trace_seeds(out):
    lines = [
        {"timestamp": 500, "input_length": 8, "output_length": 2, "hash_ids": [1, 2]},
        {"timestamp": 0, "input_length": 40, "output_length": 10, "hash_ids": [1, 2, 3]},
        {"timestamp": 12.5, "input_length": 17, "output_length": 0, "hash_ids": [1, 9]},
        {"timestamp": 1, "input_length": 8, "output_length": 2},
        {"timestamp": -1, "input_length": 4, "output_length": 0, "hash_ids": [3]},
    ]
    text = "\n".join(compact(line) for line in lines) + "\n\n"
    # tandem-bench's reader (bench_trace) takes the same input as tandem-sim's.
    for target in ("sim_trace", "bench_trace"):
        for mode in range(4):
            write(out, target, f"mixed-{mode}", bytes([mode]) + text.encode())
    rng = random.Random(3)
    rows = []
    for i in range(30):
        n = rng.randint(1, 2000)
        blocks = (n + 511) // 512
        rows.append(compact({"timestamp": i * 37, "input_length": n, "output_length": rng.randint(0, 300),
                             "hash_ids": [rng.randint(0, 5) + j * 10 for j in range(blocks)]}))
    for target in ("sim_trace", "bench_trace"):
        write(out, target, "mooncake-512", b"\3" + "\n".join(rows).encode())
    # Findings (docs/testing.md): lines tandem-bench's Python reader used to raise on.
    findings = ['{"timestamp": 1' + "0" * 400 + ', "input_length": 1, "output_length": 1, '
                '"hash_ids": [1]}', '{"timestamp": 0, "input_length": 1' + "0" * 5000 +
                ', "output_length": 1, "hash_ids": [1]}', "[" * 3000]
    for i, line in enumerate(findings):
        write(out, "bench_trace", f"finding-{i}", b"\3" + line.encode())


PROTO_TYPES = ["RegisterWorkerRequest", "HeartbeatRequest", "KvEventBatch", "ReserveKvRequest",
               "PrefillRequest", "GenerateRequest", "GenerateResponse", "CancelRequest",
               "HealthRequest", "ReserveKvResponse", "PrefillResponse", "HealthResponse",
               "RegisterWorkerResponse", "HeartbeatResponse", "KvEventAck"]


def encode(message, text):
    proto = "tandem/v1/worker.proto" if message in {
        "ReserveKvRequest", "PrefillRequest", "GenerateRequest", "GenerateResponse",
        "CancelRequest", "HealthRequest", "ReserveKvResponse", "PrefillResponse",
        "HealthResponse"} else "tandem/v1/router_control.proto"
    data = subprocess.run(["protoc", f"--encode=tandem.v1.{message}",
                           f"--proto_path={os.path.join(ROOT, 'proto')}", proto],
                          input=text.encode(), capture_output=True, check=True).stdout
    return bytes([PROTO_TYPES.index(message)]) + struct.pack("<H", len(data)) + data


def proto_seeds(out):
    version = "version { major: 1 minor: 0 }"
    sampling = "sampling { temperature: 0.7 top_k: 40 top_p: 0.9 stop_token_ids: 2 max_tokens: 16 seed: 3 }"
    register = lambda wid, role, inc: encode("RegisterWorkerRequest", (  # noqa: E731
        f"{version} worker {{ worker_id: '{wid}' role: {role} model: 'm' "
        f"grpc_endpoint: '127.0.0.1:1' kv_block_size: 16 "
        f"kv_hash_scheme: 'chained-fnv1a-splitmix64/v1' max_context: 512 "
        f"max_running_requests: 8 incarnation: {inc} max_batch_tokens: 256 }}"))
    events = encode("KvEventBatch", (
        "worker_id: 'p1' incarnation: 7 "
        "events { seq: 1 stored { tier: KV_TIER_DEVICE parent_hash: 0 block_hashes: [11, 12, 13] } } "
        "events { seq: 2 removed { tier: KV_TIER_DEVICE block_hashes: [13] } } "
        "events { seq: 3 snapshot { tiers { tier: KV_TIER_HOST block_hashes: [11, 12] } } }"))
    heartbeat = encode("HeartbeatRequest", "worker_id: 'p1' incarnation: 7 last_kv_event_seq: 3 "
                                           "load { running_requests: 1 free_kv_blocks: 10 total_kv_blocks: 20 }")
    seeds = {
        "cluster": (register("p1", "WORKER_ROLE_PREFILL", 7) + register("d1", "WORKER_ROLE_DECODE", 8)
                    + events + heartbeat + events + heartbeat),
        "combined": register("c1", "WORKER_ROLE_COMBINED", 1) + heartbeat,
        "reserve": encode("ReserveKvRequest", f"{version} request_id: 'r' num_tokens: 40 lease_ms: 100"),
        "prefill": encode("PrefillRequest", (
            f"{version} request_id: 'r' prompt_token_ids: [1, 2, 3] {sampling} "
            "kv_target { decode_worker_id: 'd1' ucx_address: 'x' blocks { remote_addr: 4096 "
            "rkey: 'k' flag_addr: 8 flag_rkey: 'f' } block_bytes: 1024 handoff_id: 'h' lease_ms: 50 } "
            "deadline_unix_ms: 1 traffic_class: 'agent' resumed_tokens: 1")),
        "generate": encode("GenerateRequest", (
            f"{version} request_id: 'r' prompt_token_ids: [1, 2] {sampling} handoff_id: 'h' "
            "first_token_id: 5 traffic_class: 'chat'")),
        "responses": b"".join(encode(m, t) for m, t in [
            ("GenerateResponse", "token_ids: [1, 2] finish_reason: FINISH_REASON_STOP "
                                 "usage { prompt_tokens: 3 completion_tokens: 2 }"),
            ("CancelRequest", "request_id: 'r'"), ("HealthRequest", ""),
            ("ReserveKvResponse", "target { block_bytes: 64 handoff_id: 'h' }"),
            ("PrefillResponse", "first_token_id: 4 cached_prompt_tokens: 16 handoff_id: 'h'"),
            ("HealthResponse", "serving: true load { running_requests: 2 }"),
            ("RegisterWorkerResponse", f"{version} heartbeat_interval_ms: 500 lease_ms: 3000"),
            ("HeartbeatResponse", "reregister: true"), ("KvEventAck", "acked_seq: 3")]),
    }
    for name, data in seeds.items():
        write(out, "proto_messages", name, data)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "fuzz", "corpus")
    if os.path.isdir(out):
        shutil.rmtree(out)
    http_seeds(out)
    protocol_seeds(out)
    stream_seeds(out)
    completions_seeds(out)
    tokenizer_seeds(out)
    llama2c_tokenizer_seeds(out)
    model_seeds(out)
    trace_seeds(out)
    proto_seeds(out)
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(out) for f in fs)
    print(f"seeds in {out}: {sum(len(fs) for _, _, fs in os.walk(out))} files, {total} bytes")


if __name__ == "__main__":
    main()
