#!/usr/bin/env python3
"""Synthetic Mooncake-format traces for checking a routing policy on traffic it was not tuned on.
Generated at run time from a kind and a seed (the suite lives here, not as committed files).

  make_synthetic_trace.py --kind fanout  --seed 1 [--block-size 512] [knobs] > fanout.jsonl
  make_synthetic_trace.py --kind mix --seed 3 --block-size 64 --burst 4 > mix.jsonl

Kinds (sharing structure):
  fanout     many tenants share long system prompts (Zipf-popular, --tenants, --zipf); a global
             preamble shared by all, then the tenant's prompt, then a unique question. Wide and
             shallow: one prefix, many requests, no history. (`tenants` is the old name.)
  multiturn  long conversations: a short global system prompt, a long first message, then turns
             that append the previous answer and a new message (--turns mean turns per session,
             think time --think-s). Deep and narrow: one private chain per session.
  agentic    agent sessions: one of a few agent system prompts (tool schemas, --agents), a task,
             then bursts of short turns each appending a tool call and its (heavy-tailed) result,
             seconds apart (--agent-turns, --agent-gap-s). Long, fast-growing private prefixes.
  rag        a per-app system prompt (--apps), then --docs documents drawn from a Zipf-popular
             corpus (--corpus) in the middle of the prompt, then a unique question. Only the
             system prompt and a common first document are a shared prefix; later documents are
             shared only behind the same earlier ones.
  mix        the four above at once, each a quarter of --rate (sessions counted as their turns).
  tenants    alias of fanout (kept for older command lines).

Common knobs: --rate (mean requests per second, turns included), --duration-s (arrivals stop
there), --block-size (tokens per hash id: 16, 64, 512), --tail (log-normal sigma of every length:
0.5 light, 1.0 heavy; lengths are capped at --max-tokens), --burst (arrivals of new requests and
sessions: 1 = Poisson; B > 1 = on/off Markov-modulated, bursts of B x the rate a fraction 1/B of the
time, silent otherwise, so the mean rate is kept) and --burst-period-s (mean on+off cycle).

Each line: {"timestamp": ms, "input_length": n, "output_length": n, "hash_ids": [...]} with one id
per --block-size tokens (the last block may be partial). Ids come from block contents: a prompt is
a list of segments (system prompt, document, message, ...), and two blocks get the same id exactly
when they hold the same tokens of the same segments at the same offsets behind the same blocks, so
equal leading ids mean equal prefixes, as in the Mooncake traces.
"""
import argparse
import json
import math
import random
import sys


class Blocks:
    """Prompt segments -> block ids. A segment is (segment id, length in tokens)."""

    def __init__(self, block_size):
        self.block_size = block_size
        self.ids = {}
        self.next_segment = 0

    def segment(self, length):
        self.next_segment += 1
        return (self.next_segment, max(1, int(length)))

    def hash_ids(self, segments):
        bs = self.block_size
        out = []
        parent = -1
        pieces = []
        filled = 0
        for seg_id, length in segments:
            offset = 0
            while offset < length:
                take = min(bs - filled, length - offset)
                pieces.append((seg_id, offset, take))
                offset += take
                filled += take
                if filled == bs:
                    parent = self._id(parent, pieces)
                    out.append(parent)
                    pieces, filled = [], 0
        if pieces:
            out.append(self._id(parent, pieces))
        return out

    def _id(self, parent, pieces):
        # The parent's id is part of the key: equal ids mean equal prefixes, not just equal blocks.
        key = (parent, tuple(pieces))
        got = self.ids.get(key)
        if got is None:
            got = self.ids[key] = len(self.ids)
        return got


class Lengths:
    """Heavy-tailed lengths: log-normal around a median, sigma = --tail, clamped."""

    def __init__(self, rng, sigma, cap):
        self.rng, self.sigma, self.cap = rng, sigma, cap

    def __call__(self, median, low=1, high=None):
        v = median * math.exp(self.rng.gauss(0.0, self.sigma))
        return int(min(max(v, low), high if high is not None else self.cap, self.cap))


class Arrivals:
    """Start times of independent requests or sessions: Poisson, or on/off bursts at the same mean
    rate (on periods at burst x rate for a fraction 1/burst of the time, off periods silent)."""

    def __init__(self, rng, rate, burst, period_s):
        self.rng, self.rate, self.burst, self.period = rng, rate, burst, period_s
        self.t = 0.0
        self.on = True
        self.switch = self._next_switch(0.0)

    def _next_switch(self, t):
        if self.burst <= 1:
            return math.inf
        # Mean on time period / burst, off time the rest: on x burst x rate covers the mean rate.
        on_mean = self.period / self.burst
        mean = on_mean if self.on else self.period - on_mean
        return t + self.rng.expovariate(1.0 / mean)

    def next(self):
        while True:
            rate = self.rate * (self.burst if self.on else 0.0) if self.burst > 1 else self.rate
            gap = self.rng.expovariate(rate) if rate > 0 else math.inf
            if self.t + gap < self.switch:
                self.t += gap
                return self.t
            self.t = self.switch
            self.on = not self.on
            self.switch = self._next_switch(self.t)


def request(t_s, segments, blocks, tokens, output):
    return {"timestamp": int(t_s * 1000), "input_length": tokens, "output_length": output,
            "hash_ids": blocks.hash_ids(segments)}


def total(segments):
    return sum(length for _, length in segments)


def zipf_weights(rng, n, s):
    w = [1.0 / (k + 1) ** s for k in range(n)]
    rng.shuffle(w)
    return w


def fanout(rng, args, blocks, length, rate):
    preamble = blocks.segment(length(args.scale * 600, 16))
    prompts = [blocks.segment(length(args.scale * 4000, 256)) for _ in range(args.tenants)]
    weights = zipf_weights(rng, args.tenants, args.zipf)
    arrivals = Arrivals(rng, rate, args.burst, args.burst_period_s)
    out = []
    while (t := arrivals.next()) < args.duration_s:
        tenant = rng.choices(range(args.tenants), weights)[0]
        segs = [preamble, prompts[tenant], blocks.segment(length(args.scale * 600, 8))]
        out.append(request(t, segs, blocks, total(segs), length(250, 1, 4000)))
    return out


def conversation(rng, args, blocks, length, t, head, first_median, turns_mean, gap, message,
                 answer):
    """One session's requests: head segments, a first message, then turns appending the previous
    answer and a new message. Stops at the duration, the context cap or at random (geometric)."""
    out = []
    history = list(head) + [blocks.segment(length(first_median, 16))]
    while t < args.duration_s:
        tokens = total(history)
        output = answer()
        out.append(request(t, history, blocks, tokens, output))
        if rng.random() < 1.0 / turns_mean or tokens + output > args.max_context:
            break
        history = history + [blocks.segment(output), blocks.segment(message())]
        t += gap()
    return out


def multiturn(rng, args, blocks, length, rate):
    system = [blocks.segment(length(args.scale * 800, 16))]
    arrivals = Arrivals(rng, rate / args.turns, args.burst, args.burst_period_s)
    out = []
    while (t := arrivals.next()) < args.duration_s:
        out += conversation(
            rng, args, blocks, length, t, system, args.scale * 3000, args.turns,
            gap=lambda: args.think_s * math.exp(rng.gauss(0, args.tail)),
            message=lambda: length(args.scale * 300, 4, 8000),
            answer=lambda: length(300, 1, 4000))
    return out


def agentic(rng, args, blocks, length, rate):
    agents = [blocks.segment(length(args.scale * 6000, 256)) for _ in range(args.agents)]
    weights = zipf_weights(rng, args.agents, 1.0)
    arrivals = Arrivals(rng, rate / args.agent_turns, args.burst, args.burst_period_s)
    out = []
    while (t := arrivals.next()) < args.duration_s:
        agent = agents[rng.choices(range(args.agents), weights)[0]]
        # A turn appends the model's tool call (its output) and the tool's result.
        out += conversation(
            rng, args, blocks, length, t, [agent], args.scale * 800, args.agent_turns,
            gap=lambda: rng.expovariate(1.0 / args.agent_gap_s),
            message=lambda: length(args.scale * 700, 8, 30000),
            answer=lambda: length(120, 1, 2000))
    return out


def rag(rng, args, blocks, length, rate):
    apps = [blocks.segment(length(args.scale * 1000, 64)) for _ in range(args.apps)]
    app_weights = zipf_weights(rng, args.apps, 1.0)
    corpus = [blocks.segment(length(args.scale * 1500, 64, 16000)) for _ in range(args.corpus)]
    doc_weights = zipf_weights(rng, args.corpus, args.zipf)
    arrivals = Arrivals(rng, rate, args.burst, args.burst_period_s)
    out = []
    while (t := arrivals.next()) < args.duration_s:
        app = apps[rng.choices(range(args.apps), app_weights)[0]]
        docs = []
        while len(docs) < min(args.docs, args.corpus):
            d = rng.choices(range(args.corpus), doc_weights)[0]
            if d not in docs:
                docs.append(d)
        segs = [app] + [corpus[d] for d in docs] + [blocks.segment(length(args.scale * 150, 4))]
        out.append(request(t, segs, blocks, total(segs), length(200, 1, 3000)))
    return out


KINDS = {"fanout": fanout, "tenants": fanout, "multiturn": multiturn, "agentic": agentic,
         "rag": rag}


def generate(args):
    rng = random.Random(args.seed)
    blocks = Blocks(args.block_size)
    length = Lengths(rng, args.tail, args.max_tokens)
    if args.kind == "mix":
        rows = []
        for kind in ("fanout", "multiturn", "agentic", "rag"):
            rows += KINDS[kind](rng, args, blocks, length, args.rate / 4)
    else:
        rows = KINDS[args.kind](rng, args, blocks, length, args.rate)
    rows.sort(key=lambda r: r["timestamp"])
    return rows


def parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--kind", choices=sorted(KINDS) + ["mix"], required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--block-size", type=int, default=512, help="tokens per hash id")
    p.add_argument("--rate", type=float, default=4.0, help="mean requests per second")
    p.add_argument("--duration-s", type=float, default=900.0)
    p.add_argument("--tail", type=float, default=0.8, help="log-normal sigma of lengths")
    p.add_argument("--scale", type=float, default=1.0, help="multiplies prompt-side medians")
    p.add_argument("--max-tokens", type=int, default=32000, help="cap of any one segment")
    p.add_argument("--max-context", type=int, default=100000, help="a session ends beyond it")
    p.add_argument("--burst", type=float, default=1.0, help="1: Poisson; B: on/off bursts")
    p.add_argument("--burst-period-s", type=float, default=60.0)
    p.add_argument("--tenants", type=int, default=150, help="fanout: system prompts")
    p.add_argument("--zipf", type=float, default=1.1, help="fanout/rag popularity exponent")
    p.add_argument("--turns", type=float, default=6.0, help="multiturn: mean turns per session")
    p.add_argument("--think-s", type=float, default=30.0, help="multiturn: median think time")
    p.add_argument("--agents", type=int, default=4, help="agentic: agent system prompts")
    p.add_argument("--agent-turns", type=float, default=15.0, help="agentic: mean turns")
    p.add_argument("--agent-gap-s", type=float, default=2.0, help="agentic: mean gap of a turn")
    p.add_argument("--apps", type=int, default=3, help="rag: system prompts")
    p.add_argument("--corpus", type=int, default=400, help="rag: documents")
    p.add_argument("--docs", type=int, default=3, help="rag: documents per request")
    return p


def main(argv=None):
    args = parser().parse_args(argv)
    if args.block_size < 1 or args.rate <= 0 or args.duration_s <= 0 or args.burst < 1:
        sys.exit("make_synthetic_trace.py: block size and rate must be positive, burst >= 1")
    for r in generate(args):
        sys.stdout.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
