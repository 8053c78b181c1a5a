"""Workloads for tandem-bench: Mooncake-format traces and fixed-length / Poisson requests, and
the synthetic prompt text that makes equal trace hash ids equal tokens for the server."""

from __future__ import annotations

import dataclasses
import json
import math
import random
import struct
import sys
from pathlib import Path
from typing import Iterable


@dataclasses.dataclass
class BenchRequest:
    arrival_s: float          # seconds after the start of the run
    input_tokens: int         # the prompt's length in server tokens
    output_tokens: int
    hash_ids: list[int]       # one per block of `block_tokens` prompt tokens ([] for fixed-length)


def read_trace(path: Path, trace_block_size: int, log=sys.stderr) -> list[dict]:
    """Mooncake lines {timestamp (ms), input_length, output_length, hash_ids}. A malformed line is
    reported with its number and skipped, never fatal."""
    rows = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            why = None
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                why = f"not valid JSON ({e.msg})"
            except (ValueError, RecursionError) as e:
                # An integer past Python's digit limit, or nesting past the recursion limit.
                why = f"not usable JSON ({type(e).__name__})"
            else:
                why = _check_row(row, trace_block_size)
            if why is not None:
                print(f"{path}:{number}: {why} (skipped)", file=log)
                continue
            rows.append(row)
    return rows


# Beyond any model's context (tandem-sim's bound too): one such line would stall a replay for hours.
MAX_TRACE_TOKENS = 1 << 24


def _is_count(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _is_time(v) -> bool:
    """A non-negative number that is a finite float (a huge JSON integer is not)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return math.isfinite(float(v)) and v >= 0
    except OverflowError:
        return False


def _check_row(row, block_size: int) -> str | None:
    if not isinstance(row, dict):
        return "not a JSON object"
    for field in ("timestamp", "input_length", "output_length", "hash_ids"):
        if field not in row:
            return f"missing '{field}'"
    if not _is_time(row["timestamp"]):
        return "'timestamp' must be a non-negative number (ms)"
    if not _is_count(row["input_length"]) or row["input_length"] == 0:
        return "'input_length' must be a positive integer"
    if not _is_count(row["output_length"]):
        return "'output_length' must be a non-negative integer"
    if row["input_length"] > MAX_TRACE_TOKENS or row["output_length"] > MAX_TRACE_TOKENS:
        return f"'input_length' and 'output_length' must be at most {MAX_TRACE_TOKENS}"
    ids = row["hash_ids"]
    if not isinstance(ids, list) or not all(_is_count(i) for i in ids):
        return "'hash_ids' must be an array of non-negative integers"
    expected = -(-row["input_length"] // block_size)
    if len(ids) != expected:
        return (f"{len(ids)} hash_ids for input_length {row['input_length']} "
                f"(expected {expected} blocks of {block_size})")
    return None


def trace_requests(rows: list[dict], trace_block_size: int, block_tokens: int,
                   time_scale: float, output_scale: float, max_output: int,
                   start_ms: float = 0, duration_s: float = math.inf,
                   max_requests: int | None = None) -> list[BenchRequest]:
    """Turns trace rows into requests: each trace block becomes `block_tokens` server tokens (the
    last one in proportion), arrivals are compressed `time_scale` times."""
    out = []
    for row in sorted(rows, key=lambda r: r["timestamp"]):
        if row["timestamp"] < start_ms:
            continue
        arrival = (row["timestamp"] - start_ms) / 1000.0 / time_scale
        if arrival > duration_s:
            break
        n_blocks = len(row["hash_ids"])
        last = row["input_length"] - (n_blocks - 1) * trace_block_size
        tokens = (n_blocks - 1) * block_tokens + max(1, round(last * block_tokens / trace_block_size))
        output = max(1, min(max_output, round(row["output_length"] * output_scale)))
        out.append(BenchRequest(arrival, tokens, output, list(row["hash_ids"])))
        if max_requests is not None and len(out) >= max_requests:
            break
    return out


def fixed_requests(count: int, input_tokens: int, output_tokens: int, rate: float,
                   seed: int) -> list[BenchRequest]:
    """`count` requests of fixed lengths, Poisson arrivals at `rate` per second (inf: all at once).
    Each prompt is distinct (no shared prefix)."""
    rng = random.Random(seed)
    t = 0.0
    out = []
    for i in range(count):
        if math.isfinite(rate):
            t += rng.expovariate(rate)
        # Unique ids per request: no two prompts share a block.
        out.append(BenchRequest(t, input_tokens, output_tokens, [(1 << 40) + i]))
    return out


def mooncake_rows(requests: list[BenchRequest], block_tokens: int) -> list[dict]:
    """The workload as sent, in Mooncake format with `block_tokens`-token blocks, for tandem-sim
    (`--block-size block_tokens`, no `--speedup`: timestamps are already the scaled arrivals, ms).
    A prompt with fewer ids than blocks (fixed-length workloads: one id makes the whole text) gets
    fresh ids for the rest, unused by any other request, so it shares nothing, as it did when
    sent."""
    fresh = 1 + max((i for r in requests for i in r.hash_ids), default=-1)
    rows = []
    for r in requests:
        blocks = -(-r.input_tokens // block_tokens)
        ids = list(r.hash_ids[:blocks])
        while len(ids) < blocks:
            ids.append(fresh)
            fresh += 1
        rows.append({"timestamp": round(r.arrival_s * 1000.0, 3), "input_length": r.input_tokens,
                     "output_length": r.output_tokens, "hash_ids": ids})
    return rows


class Vocabulary:
    """Words that each encode to exactly one token of the server's tokenizer, so a block of N words
    is N tokens and equal hash ids give equal token blocks."""

    def __init__(self, words: list[str]):
        if len(words) < 16:
            raise ValueError(f"only {len(words)} single-token words: too few for distinct blocks")
        self.words = words

    def block_text(self, hash_id: int, tokens: int) -> str:
        rng = random.Random(hash_id * 0x9E3779B97F4A7C15 & ((1 << 64) - 1))
        return "".join(" " + rng.choice(self.words) for _ in range(tokens))

    def prompt(self, request: BenchRequest, block_tokens: int) -> str:
        parts = []
        left = request.input_tokens
        ids = request.hash_ids or [0]
        for i, hash_id in enumerate(ids):
            if left <= 0:
                break
            n = left if i == len(ids) - 1 else min(block_tokens, left)
            parts.append(self.block_text(hash_id, n))
            left -= n
        return "".join(parts).lstrip(" ")


def llama2c_vocabulary(tokenizer_bin: Path) -> Vocabulary:
    """Single-token words of a llama2.c tokenizer.bin (e.g. stories260K's tok512): pieces ' word'
    that its score-greedy BPE produces whole from the word's characters."""
    data = Path(tokenizer_bin).read_bytes()
    (max_len,) = struct.unpack_from("<i", data, 0)
    pos = 4
    pieces, scores = [], []
    while pos < len(data):
        score, length = struct.unpack_from("<fi", data, pos)
        pos += 8
        pieces.append(data[pos:pos + length].decode("utf-8", errors="replace"))
        scores.append(score)
        pos += length
    index = {p: i for i, p in enumerate(pieces)}

    def encode(text: str) -> list[int]:
        ids = [index[c] for c in text if c in index]
        if len(ids) != len(text):
            return []
        while True:
            best, best_i = -math.inf, -1
            for i in range(len(ids) - 1):
                merged = index.get(pieces[ids[i]] + pieces[ids[i + 1]])
                if merged is not None and scores[merged] > best:
                    best, best_i = scores[merged], i
            if best_i < 0:
                return ids
            ids[best_i:best_i + 2] = [index[pieces[ids[best_i]] + pieces[ids[best_i + 1]]]]

    words = sorted({p[1:] for p in pieces
                    if len(p) > 1 and p[0] == " " and p[1:].isalpha() and p[1:].isascii()
                    and len(encode(p)) == 1})
    return Vocabulary(words)


def hf_vocabulary(tokenizer_json: Path) -> Vocabulary:
    """Single-token words of a Hugging Face tokenizer.json (needs the `tokenizers` package)."""
    from tokenizers import Tokenizer  # optional dependency, only for this case
    tok = Tokenizer.from_file(str(tokenizer_json))
    words = []
    for piece in tok.get_vocab():
        word = piece.lstrip("\u0120\u2581")
        if len(word) < 2 or len(word) == len(piece) or not word.isalpha() or not word.isascii():
            continue
        if len(tok.encode(" " + word, add_special_tokens=False).ids) == 1:
            words.append(word)
    return Vocabulary(sorted(words))


def plain_vocabulary() -> Vocabulary:
    """Without the server's tokenizer: common English words (lengths are then approximate)."""
    return Vocabulary(("the a to and of in is it was he she they day time sun tree dog cat bird "
                       "ball big little happy sad good friend play run jump saw said went home "
                       "mom dad one girl boy named very fun").split())


def load_vocabulary(tokenizer: str | None) -> Vocabulary:
    if tokenizer is None:
        return plain_vocabulary()
    path = Path(tokenizer)
    if path.is_dir():
        for name in ("tokenizer.json", "tokenizer.bin"):
            if (path / name).exists():
                path = path / name
                break
    if path.suffix == ".json":
        return hf_vocabulary(path)
    return llama2c_vocabulary(path)


def describe(requests: Iterable[BenchRequest]) -> str:
    rs = list(requests)
    if not rs:
        return "0 requests"
    span = rs[-1].arrival_s - rs[0].arrival_s
    return (f"{len(rs)} requests over {span:.1f} s, prompts {min(r.input_tokens for r in rs)}-"
            f"{max(r.input_tokens for r in rs)} tokens, outputs {min(r.output_tokens for r in rs)}-"
            f"{max(r.output_tokens for r in rs)}")
