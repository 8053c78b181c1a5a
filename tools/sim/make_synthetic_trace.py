#!/usr/bin/env python3
"""Synthetic Mooncake-format traces with other sharing structures than the conversation trace,
to check a routing policy on traffic it was not tuned on.

  make_synthetic_trace.py --kind tenants   --seed 1 > tenants.jsonl
  make_synthetic_trace.py --kind multiturn --seed 2 > multiturn.jsonl

tenants:   many tenants, each with a long shared prefix (system prompt + documents, llm-d's
           benchmark shape), Zipf-popular; each request adds a unique question. Sharing is wide
           and shallow: one prefix, many requests, no history.
multiturn: sessions of several turns whose prompts grow by the previous answer and a new user
           message, with think time between turns, on top of one short global system prompt.
           Sharing is deep and narrow: one chain per session.
Each line: {"timestamp": ms, "input_length": n, "output_length": n, "hash_ids": [...]} with one id
per 512 tokens (the last block may be partial), as in the Mooncake traces.
"""
import argparse
import json
import math
import random
import sys

BLOCK = 512


class Ids:
    def __init__(self):
        self.next = 0

    def fresh(self, n):
        ids = list(range(self.next, self.next + n))
        self.next += n
        return ids


def emit(out, t_ms, ids_for_tokens, tokens, output):
    blocks = math.ceil(tokens / BLOCK)
    assert len(ids_for_tokens) >= blocks
    out.append({"timestamp": int(t_ms), "input_length": tokens, "output_length": output,
                "hash_ids": ids_for_tokens[:blocks]})


def tenants(rng, args):
    ids = Ids()
    n_tenants = 150
    prefixes = [ids.fresh(rng.randint(6, 16)) for _ in range(n_tenants)]
    weights = [1.0 / (k + 1) ** 1.1 for k in range(n_tenants)]
    rng.shuffle(weights)
    out = []
    t = 0.0
    while t < args.duration_s:
        t += rng.expovariate(args.rate)
        tenant = rng.choices(range(n_tenants), weights)[0]
        prefix = prefixes[tenant]
        question = rng.randint(100, 4000)
        tokens = len(prefix) * BLOCK + question
        emit(out, t * 1000, prefix + ids.fresh(math.ceil(question / BLOCK)), tokens,
             rng.randint(50, 600))
    return out


def multiturn(rng, args):
    ids = Ids()
    system = ids.fresh(2)  # 1,024 tokens shared by every session
    out = []
    t = 0.0
    while t < args.duration_s:
        t += rng.expovariate(args.rate / 4.0)  # about 4 turns per session
        history_ids = list(system)
        history_tokens = len(system) * BLOCK
        turn_t = t
        first = rng.randint(500, 12000)  # a pasted document or a long first message
        pending = first
        while turn_t < args.duration_s:
            # The prompt is the whole history plus this turn's message; block ids continue the
            # history's (its last partial block is re-sent with the new text, so it gets a new id).
            full_blocks = history_tokens // BLOCK
            tokens = history_tokens + pending
            ids_now = history_ids[:full_blocks] + ids.fresh(math.ceil(tokens / BLOCK) - full_blocks)
            output = rng.randint(80, 900)
            emit(out, turn_t * 1000, ids_now, tokens, output)
            history_ids = ids_now
            history_tokens = tokens + output
            # The answer extends the history: its blocks are new.
            history_ids = history_ids[:tokens // BLOCK] + ids.fresh(
                math.ceil(history_tokens / BLOCK) - tokens // BLOCK)
            if rng.random() < 0.25 or history_tokens > 100000:
                break
            turn_t += rng.expovariate(1 / 45.0) + 5
            pending = rng.randint(30, 1500)
    out.sort(key=lambda r: r["timestamp"])
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--kind", choices=["tenants", "multiturn"], required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--rate", type=float, default=4.0, help="requests per second")
    p.add_argument("--duration-s", type=float, default=3000.0)
    args = p.parse_args()
    rng = random.Random(args.seed)
    rows = tenants(rng, args) if args.kind == "tenants" else multiturn(rng, args)
    for r in rows:
        sys.stdout.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
