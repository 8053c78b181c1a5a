#!/usr/bin/env bash
# The image decoders under libFuzzer with ASan + UBSan for SECONDS (default 60), outside CI's
# default run: builds fuzz_image_decode in the fuzz build directory (clang, as tests/fuzz/run.sh
# does) and runs it from the committed seeds. The executions go to <build>/executions.tsv;
# docs/testing.md records a run. Usage: tests/fuzz/image_long.sh [SECONDS]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
exec "$root/tests/fuzz/run.sh" "${1:-60}" image_decode
