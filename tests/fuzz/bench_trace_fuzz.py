"""atheris target: tandem-bench's trace reader (tests/perf/bench/workload.read_trace) must report
and skip every malformed line, never raise, and the rows it keeps must become requests. Input: a byte choosing the block size, then the
trace text. Run through tests/fuzz/run.sh (target name bench_trace)."""
import io
import os
import sys
import tempfile

import atheris

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "perf", "bench"))
with atheris.instrument_imports():
    import workload

BLOCK_SIZES = [1, 2, 16, 512]
PATH = os.path.join(tempfile.mkdtemp(prefix="tandem-fuzz-"), "trace.jsonl")


def test_one_input(data: bytes):
    if not data:
        return
    with open(PATH, "wb") as f:
        f.write(data[1:])
    block_size = BLOCK_SIZES[data[0] % 4]
    rows = workload.read_trace(PATH, block_size, log=io.StringIO())
    # What tandem-bench does with the rows next must not fail either.
    for request in workload.trace_requests(rows, block_size, 16, 2.0, 0.5, 4096):
        assert request.input_tokens >= 1 and request.output_tokens >= 1


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
