#!/usr/bin/env python3
"""How the routing criterion responds to one tandem option, over the trace suite (acceptance.py's
traces, configurations and verdicts). The baselines are replayed once per trace and configuration;
tandem once per value.

  tools/sim/sensitivity.py --sim build/tools/sim/tandem-sim --suite --seeds tune \\
      --param cache_stickiness=10,20,40 [--trace T.jsonl] [--only NAME] [--config 4096x1 ...] \\
      [--jobs 2] [--json rows.json] [-- extra tandem-sim flags, applied to every run]

--param takes a --tandem option (KEY=V1,V2) or a tandem-sim flag (--param=--FLAG=V1,V2).

Prints one row per value: configurations passing, failures by kind (hit, p90 lost, no win where
there is headroom), the median and worst p90 ratio to the best baseline, and the worst hit
margin (tandem's hit rate - the best baseline's; the criterion allows -0.005).
"""
import argparse
import concurrent.futures
import json
import statistics
import sys
import tempfile

import acceptance


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sim", required=True)
    parser.add_argument("--suite", action="store_true")
    parser.add_argument("--seeds", default="tune")
    parser.add_argument("--only", action="append")
    parser.add_argument("--trace", action="append")
    parser.add_argument("--config", action="append")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--param", required=True,
                        help="KEY=V1,V2,... (a --tandem option, or a tandem-sim flag: --FLAG=V1,...)")
    parser.add_argument("--jobs", type=int, default=1, help="configurations replayed at once")
    parser.add_argument("--json", help="write every row here, by value")
    parser.add_argument("extra", nargs="*")
    args = parser.parse_args()
    key, _, values = args.param.partition("=")
    values = [v for v in values.split(",") if v]
    configs = args.config or acceptance.DEFAULT_CONFIGS
    rows = {v: [] for v in values}
    setting = (lambda v: [key, v]) if key.startswith("--") else (
        lambda v: ["--tandem", "%s=%s" % (key, v)])

    def one(name, path, block, config):
        capacity, _, speedup = config.partition("x")
        speedup = speedup or "1"
        published = acceptance.replay(args.sim, path, block, args.workers, capacity, speedup,
                                      acceptance.BASELINES, args.extra)
        out = {}
        for v in values:
            ours = acceptance.replay(args.sim, path, block, args.workers, capacity, speedup,
                                     ["tandem"], [*args.extra, *setting(v)])
            out[v] = acceptance.judge(ours["tandem"], published, {})
            out[v].update(trace=name, config=config)
        return out

    with tempfile.TemporaryDirectory(prefix="tandem-sens-") as tmp, \
            concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        work = [pool.submit(one, name, path, block, config)
                for name, path, block in acceptance.traces(args, tmp) for config in configs]
        for future in work:
            for v, j in future.result().items():
                rows[v].append(j)
    print("| %s | pass | hit fails | p90 lost | no win | median ratio | worst ratio | "
          "worst hit margin |\n| --- | --- | --- | --- | --- | --- | --- | --- |" % key)
    for v in values:
        r = rows[v]
        count = lambda what: sum(what in x["verdict"] for x in r)
        worst = min(r, key=lambda x: x["tandem_hit"] - x["best_hit"])
        print("| %s | %d / %d | %d | %d | %d | %.3f | %.3f | %+.4f (%s %s) |" % (
            v, sum(x["pass"] for x in r), len(r), count("hit"), count("p90 lost"),
            count("no win"), statistics.median(x["ratio"] for x in r),
            max(x["ratio"] for x in r), worst["tandem_hit"] - worst["best_hit"], worst["trace"],
            worst["config"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
