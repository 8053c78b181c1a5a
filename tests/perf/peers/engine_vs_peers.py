#!/usr/bin/env python3
"""tandem's engine beside llama.cpp's (and vLLM's, where installed) on one random-weight Llama
checkpoint: prompt processing of 512 tokens (--prompt N: N) and generation of 128 at batch 1, same
threads, same dtype, one engine at a time. Prints tokens/s and the ratios tandem/peer. Not a test.

  tests/perf/peers/setup.sh llama vllm      # once: peers into ~/.cache/tandem-peers
  cmake --build BUILD --target tandem_llama_bench
  python3 tests/perf/peers/engine_vs_peers.py --build-dir BUILD [--dtypes bf16 f16 f32]
      [--threads 2] [--repeats 3] [--prompt 512] [--vllm] [--amx | --bf16-products auto|none|amx|avx512bf16]

Per dtype: tools/llama_checkpoint/make_random_llama.py writes the checkpoint in that dtype
(cached under $PEERS/models), to_gguf.py converts it with the converter of the same llama.cpp
sources, `llama-bench -p 512 -n 128 -t THREADS` and `tandem_llama_bench DIR THREADS 512 128`
measure it, alternating --rounds times; each figure is the best run (the least disturbed one on
a shared machine; llama-bench's own samples are used for its side). tandem loads F32, BF16 and
F16 safetensors (and FP8 with block scales, which llama.cpp's converter does not take); where it
cannot load one, its column says why.
By default (--bf16-products auto) the bf16 rows also come with bf16 products where the CPU has
them, as below; --bf16-products none leaves them out. Where they are the products the services
pick by default for a bf16 checkpoint (--bf16-matmul auto: amx, else avx512bf16 where this core
runs the dot products faster than float32 FMAs; `tandem_llama_bench --auto-bf16-products` says
which), that row is labelled "bf16" and the exact float32 products' row "bf16-f32"; where auto
keeps float32 products (Intel cores without AMX), "bf16" is those and the other row
"bf16-avx512bf16".
With --amx (CPUs with AMX-BF16), tandem's bf16 checkpoint also runs with --bf16-matmul amx
(activations rounded to bf16 and multiplied on AMX tiles, the arithmetic of vLLM's and torch's bf16
path), as its own row "bf16-amx" beside the same llama.cpp and vLLM bf16 figures;
--bf16-products avx512bf16 (CPUs with AVX512-BF16 but no AMX, AMD Zen 4 on) does the same with
--bf16-matmul avx512bf16 (the same MatMul arithmetic with the dot-product instruction llama.cpp's
bf16 GEMM also uses), as the row "bf16-avx512bf16".
--isa avx2 (on an AVX-512 machine): what each engine does on an AVX2 + FMA + F16C CPU, measured
here: tandem's AVX2 kernels (`tandem_llama_bench ... avx2`), llama.cpp built for AVX2 only
(setup.sh llama-avx2) and vLLM with oneDNN, MKL and ATen capped at AVX2 (ONEDNN_MAX_CPU_ISA,
MKL_ENABLE_INSTRUCTIONS, ATEN_CPU_CAPABILITY; its own C++ kernels are not capped). Same clock, caches and memory as the
AVX-512 run, so not an AVX2 machine's figures, but the same comparison.
vLLM (--vllm): its offline engine, pp = one 512-token prompt with max_tokens 1, tg = 128 tokens
from a one-token prompt, timed around LLM.generate (so they include its scheduling).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PEERS = Path(os.environ.get("PEERS", Path.home() / ".cache" / "tandem-peers"))
LLAMA_SRC = PEERS / "src" / "llama_cpp_python-0.3.36" / "vendor" / "llama.cpp"
PY = PEERS / "venv" / "bin" / "python"

VLLM_SNIPPET = r"""
import json, sys, time
from vllm import LLM, SamplingParams
from vllm.inputs import TokensPrompt
model, dtype, pp, tg, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
# No prefix caching: the same prompt is timed repeatedly, and a cached prefix is not a prefill.
llm = LLM(model=model, dtype=dtype, max_model_len=max(pp, tg) + 16, max_num_seqs=1,
          max_num_batched_tokens=max(pp, 2048), seed=0, enable_prefix_caching=False)
def timed(prompt, n):
    sp = SamplingParams(max_tokens=n, temperature=0, ignore_eos=True)
    t = time.perf_counter()
    llm.generate([TokensPrompt(prompt_token_ids=prompt)], sp, use_tqdm=False)
    return time.perf_counter() - t
prompt = [(7919 * (i + 1)) % 21000 + 2 for i in range(pp)]
timed(prompt, 1); timed([5], tg)
pp_s = [pp / timed(prompt, 1) for _ in range(repeats)]
tg_s = [tg / timed([5], tg) for _ in range(repeats)]
print("RESULT " + json.dumps({"pp": max(pp_s), "tg": max(tg_s)}))  # best run, as for the others
"""


def run(cmd, timeout, env=None):
    print("$ " + " ".join(str(c) for c in cmd), flush=True)
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout,
                          env=env)


def checkpoint(dtype):
    out = PEERS / "models" / f"llama287m-{dtype}"
    if not (out / "config.json").exists():
        r = run([PY, ROOT / "tools/llama_checkpoint/make_random_llama.py", out, "--dtype", dtype],
                timeout=1800)
        if r.returncode != 0:
            sys.exit(f"make_random_llama failed:\n{r.stderr}")
        print(r.stdout.strip())
    return out


def gguf(model_dir, dtype):
    out = PEERS / "models" / f"llama287m-{dtype}.gguf"
    if not out.exists():
        r = run([PY, ROOT / "tests/perf/peers/to_gguf.py", LLAMA_SRC, model_dir, "--outfile", out,
                 "--outtype", dtype], timeout=1800)
        if r.returncode != 0:
            sys.exit(f"GGUF conversion failed:\n{r.stderr[-4000:]}")
    return out


def llama_bench(path, threads, repeats, isa, prompt):
    exe = PEERS / ("llama-build-avx2" if isa == "avx2" else "llama-build") / "bin" / "llama-bench"
    if not exe.exists():
        return None, [f"{exe} missing (tests/perf/peers/setup.sh llama{'-avx2' if isa == 'avx2' else ''})"]
    r = run([exe, "-m", path, "-p", prompt, "-n", "128", "-t", threads, "-r", repeats, "-o", "json"],
            timeout=3600)
    if r.returncode != 0:
        return None, r.stderr.strip().splitlines()[-1:]
    res = {}
    for t in json.loads(r.stdout):
        res["pp" if t["n_prompt"] > 0 else "tg"] = max(t["samples_ts"])
    return res, None


def tandem_bench(build, model_dir, threads, repeats, isa, prompt, layout="panels"):
    exe = Path(build) / "tests" / "perf" / "tandem_llama_bench"
    r = run([exe, model_dir, threads, prompt, 128, repeats, 1, isa, layout], timeout=3600)
    if r.returncode != 0:
        return None, (r.stderr.strip() or r.stdout.strip()).splitlines()[-1]
    res = {}
    for line in r.stdout.splitlines():
        m = re.match(r"(pp|tg)\d+\s+[\d.]+ t/s .* best ([\d.]+)", line)
        if m:
            res[m.group(1)] = float(m.group(2))
    return res, None


def vllm_bench(model_dir, dtype, threads, repeats, isa, prompt):
    if subprocess.run([str(PY), "-c", "import vllm"], capture_output=True).returncode != 0:
        return None, "vllm not installed ($PEERS/venv; tests/perf/peers/setup.sh vllm)"
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="2", VLLM_CPU_OMP_THREADS_BIND=f"0-{threads - 1}",
               VLLM_CPU_NUM_OF_RESERVED_CPU="0", OMP_NUM_THREADS=str(threads))
    if isa == "avx2":
        env.update(ONEDNN_MAX_CPU_ISA="AVX2", ATEN_CPU_CAPABILITY="avx2",
                   MKL_ENABLE_INSTRUCTIONS="AVX2")  # torch's float32 GEMMs go to MKL
    torch_dtype = {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}[dtype]
    r = run([PY, "-c", VLLM_SNIPPET, model_dir, torch_dtype, prompt, 128, repeats], timeout=1800,
            env=env)
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:]), None
    tail = [l for l in (r.stderr or "").splitlines() if l.strip()][-3:]
    return None, "vLLM failed: " + " | ".join(tail)


def bf16_products_here():
    """The bf16-product MatMul this CPU has (its flags as Linux reports them), or None."""
    try:
        flags = set(re.search(r"^flags\s*:(.*)$", Path("/proc/cpuinfo").read_text(), re.M)
                    .group(1).split())
    except (OSError, AttributeError):
        return None
    if {"amx_tile", "amx_bf16", "avx512_bf16"} <= flags:
        return "amx"
    return "avx512bf16" if "avx512_bf16" in flags else None


def tandem_auto_bf16(build_dir):
    """What tandem's --bf16-matmul auto runs for a bf16 checkpoint on this CPU ("amx",
    "avx512bf16" or "f32": the dot products only where they outrun float32 FMAs), and why."""
    r = run([Path(build_dir) / "tests/perf/tandem_llama_bench", "--auto-bf16-products"], timeout=60)
    line = r.stdout.strip()
    return (line.split()[0] if r.returncode == 0 and line else None), line


def fmt(x):
    return f"{x:8.1f}" if isinstance(x, (int, float)) else f"{'-':>8}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", default=os.environ.get("BUILD_DIR", ROOT / "build"))
    ap.add_argument("--dtypes", nargs="+", default=["bf16", "f16", "f32"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2,
                    help="engines alternate this many times per dtype; the best run counts")
    ap.add_argument("--vllm", action="store_true", help="also vLLM's offline engine (slow start)")
    ap.add_argument("--amx", action="store_const", const="amx", dest="bf16_products",
                    help="bf16 also with tandem's --bf16-matmul amx (its own row, bf16-amx)")
    ap.add_argument("--bf16-products", choices=["auto", "none", "amx", "avx512bf16"],
                    default="auto", dest="bf16_products",
                    help="bf16 also with tandem's --bf16-matmul MODE (its own row, bf16-MODE); "
                         "auto (default): amx or avx512bf16 where this CPU has it (the same "
                         "arithmetic as the peers' bf16 paths), none elsewhere and with --isa avx2")
    ap.add_argument("--prompt", type=int, default=512,
                    help="prompt tokens of the pp test (the checkpoint has 2048 positions; vLLM "
                         "wants the prompt plus 16 within them: at most 2032 with --vllm)")
    ap.add_argument("--isa", choices=["auto", "avx2"], default="auto",
                    help="avx2: every engine held to AVX2 + FMA + F16C (see above)")
    # --amx shares the destination, and argparse takes a shared destination's default from the
    # first option that names it (--amx's None), so the default is set here.
    ap.set_defaults(bf16_products="auto")
    a = ap.parse_args()
    if a.bf16_products == "auto":
        a.bf16_products = bf16_products_here() if a.isa == "auto" else None
    elif a.bf16_products == "none":
        a.bf16_products = None
    if a.bf16_products and a.isa == "avx2":
        ap.error(f"--bf16-products {a.bf16_products} runs beside the AVX-512 kernels, not with "
                 "--isa avx2")
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load = os.getloadavg()
    rows, notes = [], []
    auto_bf16, auto_why = tandem_auto_bf16(a.build_dir) if a.isa == "auto" else (None, "")
    if "bf16" in a.dtypes and auto_why:
        notes.append(f"tandem's --bf16-matmul auto for a bf16 checkpoint here: {auto_why}")
    for dtype in a.dtypes:
        model_dir = checkpoint(dtype)
        g = gguf(model_dir, dtype)
        lc, td, tx, lc_err, td_err, tx_err = {}, {}, {}, None, None, None
        amx = a.bf16_products if dtype == "bf16" else None
        for _ in range(a.rounds):  # alternating, so a burst of load hits both engines alike
            l1, lc_err = llama_bench(g, a.threads, a.repeats, a.isa, a.prompt)
            t1, td_err = tandem_bench(a.build_dir, model_dir, a.threads, a.repeats, a.isa, a.prompt)
            x1, tx_err = (tandem_bench(a.build_dir, model_dir, a.threads, a.repeats, a.isa,
                                       a.prompt, amx)
                          if amx else (None, None))
            for best, new in ((lc, l1), (td, t1), (tx, x1)):
                for k, x in (new or {}).items():
                    best[k] = max(best.get(k, 0), x)
        vl, vl_err = (vllm_bench(model_dir, dtype, a.threads, a.repeats, a.isa, a.prompt) if a.vllm
                      else (None, None))
        for name, err in (("llama.cpp", lc_err), ("tandem", td_err), (f"tandem {amx}", tx_err),
                          ("vLLM", vl_err)):
            if err:
                notes.append(f"{dtype} {name}: {err}")
        # The services' default (--bf16-matmul auto) multiplies a bf16 checkpoint in the products
        # this CPU has and runs fast: that row is plain "bf16", the exact float32 products
        # "bf16-f32"; where auto keeps float32 products, "bf16" is those and the other row is
        # labelled by its products.
        if amx and amx == auto_bf16:
            labels = ((f"{dtype}-f32", td), (dtype, tx))
        else:
            labels = ((dtype, td), (f"{dtype}-{amx}", tx if amx else None))
        for label, mine in labels:
            if mine is None:
                continue
            for test in ("pp", "tg"):
                t = (mine or {}).get(test)
                l = (lc or {}).get(test)
                v = (vl or {}).get(test)
                rows.append((label, f"pp{a.prompt}" if test == "pp" else "tg128", t, l, v,
                             t / l if t and l else None, t / v if t and v else None))
    print(f"\nengine_vs_peers: {started}, {a.threads} threads, isa {a.isa}, best-effort load "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (1/5/15 min) at start, "
          f"{os.getloadavg()[0]:.2f} at end")
    print(f"{'dtype':8} {'test':6} {'tandem':>8} {'llama.cpp':>9} {'vLLM':>8} "
          f"{'t/llama':>8} {'t/vLLM':>8}   (tokens/s, best of {a.rounds} x {a.repeats} runs)")
    for dtype, test, t, l, v, rl, rv in rows:
        print(f"{dtype:8} {test:6} {fmt(t)} {fmt(l):>9} {fmt(v)} "
              f"{(f'{rl:8.2f}' if rl else f'{chr(45):>8}')} {(f'{rv:8.2f}' if rv else f'{chr(45):>8}')}")
    for n in notes:
        print("note: " + n)


if __name__ == "__main__":
    main()
