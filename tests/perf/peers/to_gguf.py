#!/usr/bin/env python3
"""Runs llama.cpp's convert_hf_to_gguf.py on a checkpoint from tools/llama_checkpoint.

  python to_gguf.py LLAMA_CPP_DIR MODEL_DIR --outfile OUT.gguf --outtype f32|bf16|f16

The converter names a byte-level BPE's pre-tokenizer by hashing how the tokenizer splits a test
string, and knows only the hashes of published models (convert_hf_to_gguf_update.py downloads
them to compute new ones, which needs the network). The checkpoint's tokenizer is trained here, so
its hash is new, but its pre-tokenizer is exactly GPT-2's (ByteLevel with GPT-2's regex, no
normalizer), which llama.cpp implements as "gpt-2": this wrapper answers that name for such a
tokenizer, what an entry added by convert_hf_to_gguf_update.py would do, and refuses any other.
"""

import json
import runpy
import sys
from pathlib import Path


def gpt2_pre_tokenized(model_dir):
    tok = json.loads((Path(model_dir) / "tokenizer.json").read_text())
    pre = tok.get("pre_tokenizer") or {}
    return (tok.get("normalizer") is None and pre.get("type") == "ByteLevel"
            and pre.get("use_regex", True) and not pre.get("add_prefix_space", False))


def main():
    llama_cpp, model_dir, rest = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
    sys.path.insert(0, str(llama_cpp))
    sys.path.insert(1, str(llama_cpp / "gguf-py"))
    from conversion import base  # the converter's own module, patched before it runs

    original = base.TextModel.get_vocab_base_pre

    def get_vocab_base_pre(self, tokenizer):
        try:
            return original(self, tokenizer)
        except NotImplementedError:
            if not gpt2_pre_tokenized(self.dir_model):
                raise
            return "gpt-2"

    base.TextModel.get_vocab_base_pre = get_vocab_base_pre
    sys.argv = [str(llama_cpp / "convert_hf_to_gguf.py"), model_dir, *rest]
    runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
