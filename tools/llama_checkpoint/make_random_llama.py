#!/usr/bin/env python3
"""Writes a Hugging Face Llama checkpoint with random weights, for speed comparisons only.

The same directory loads in tandem (`tandem-worker --model DIR`), vLLM and llama.cpp's
convert_hf_to_gguf.py, so every engine computes the same shapes from the same bytes.

  python3 tools/llama_checkpoint/make_random_llama.py OUT_DIR [--dtype f32|bf16|f16] [--seed N]
      [--hidden 1024 --layers 16 --heads 16 --kv-heads 4 --intermediate 4096 --vocab 21600]

The defaults are the 287.5M-parameter shape of the peer comparisons (docs/performance.md).
Needs numpy and tokenizers; the safetensors files are written here directly, because numpy has no
bfloat16 and a streaming writer keeps one tensor in memory at a time.

The tokenizer is a byte-level BPE with GPT-2's pre-tokenizer, trained on the shared corpus:
tandem's tokenizer.json reader implements that pre-tokenizer, and llama.cpp has it too (as
"gpt-2"), so its GGUF converter only has to be told the name (tests/perf/peers/to_gguf.py).
"""

import argparse
import json
import os
import struct
import sys
from pathlib import Path

import numpy as np

BOS, EOS = "<|begin_of_text|>", "<|end_of_text|>"
DTYPES = {"f32": ("F32", "float32", 4), "bf16": ("BF16", "bfloat16", 2), "f16": ("F16", "float16", 2)}
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}")


def default_corpus():
    shared = Path(__file__).resolve().parents[3] / "shared" / "corpus"
    return sorted(str(p) for p in shared.glob("*.txt"))


def to_bytes(x, dtype):
    x = np.ascontiguousarray(x, dtype=np.float32)
    if dtype == "f32":
        return x.tobytes()
    if dtype == "f16":
        return x.astype(np.float16).tobytes()
    # bf16: round to nearest even on the upper 16 bits (what torch's .to(bfloat16) does).
    u = x.view(np.uint32)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return rounded.astype(np.uint16).tobytes()


def tensor_specs(a):
    """(name, shape, kind) in the order transformers writes them; kind picks the initial values."""
    h, q, kv, inter, v = a.hidden, a.heads * a.head_dim, a.kv_heads * a.head_dim, a.intermediate, a.vocab
    yield "model.embed_tokens.weight", (v, h), "embed"
    for i in range(a.layers):
        p = f"model.layers.{i}."
        yield p + "input_layernorm.weight", (h,), "norm"
        yield p + "self_attn.q_proj.weight", (q, h), "linear"
        yield p + "self_attn.k_proj.weight", (kv, h), "linear"
        yield p + "self_attn.v_proj.weight", (kv, h), "linear"
        yield p + "self_attn.o_proj.weight", (h, q), "linear"
        yield p + "post_attention_layernorm.weight", (h,), "norm"
        yield p + "mlp.gate_proj.weight", (inter, h), "linear"
        yield p + "mlp.up_proj.weight", (inter, h), "linear"
        yield p + "mlp.down_proj.weight", (h, inter), "linear"
    yield "model.norm.weight", (h,), "norm"
    yield "lm_head.weight", (v, h), "head"


class ShardWriter:
    """Streams tensors into model-0000i-of-0000n.safetensors files of at most shard_bytes each."""

    def __init__(self, out, specs, dtype, shard_bytes):
        self.out, self.dtype = out, dtype
        st_dtype, _, size = DTYPES[dtype]
        self.shards, current, used = [], [], 0
        for name, shape, kind in specs:
            nbytes = int(np.prod(shape)) * size
            if current and used + nbytes > shard_bytes:
                self.shards.append(current)
                current, used = [], 0
            current.append((name, shape, kind, nbytes))
            used += nbytes
        self.shards.append(current)
        self.st_dtype = st_dtype

    def file_name(self, i):
        if len(self.shards) == 1:
            return "model.safetensors"
        return f"model-{i + 1:05d}-of-{len(self.shards):05d}.safetensors"

    def write(self, make):
        weight_map, total = {}, 0
        for i, shard in enumerate(self.shards):
            header, offset = {"__metadata__": {"format": "pt"}}, 0
            for name, shape, _, nbytes in shard:
                header[name] = {"dtype": self.st_dtype, "shape": list(shape),
                                "data_offsets": [offset, offset + nbytes]}
                offset += nbytes
            raw = json.dumps(header, separators=(",", ":")).encode()
            raw += b" " * (-len(raw) % 8)  # tensor data 8-byte aligned, as the format recommends
            path = self.out / self.file_name(i)
            with open(path, "wb") as f:
                f.write(struct.pack("<Q", len(raw)))
                f.write(raw)
                for name, shape, kind, _ in shard:
                    f.write(to_bytes(make(name, shape, kind), self.dtype))
                    weight_map[name] = self.file_name(i)
                    total += int(np.prod(shape))
        if len(self.shards) > 1:
            size = sum(n for s in self.shards for *_, n in s)
            index = {"metadata": {"total_size": size}, "weight_map": weight_map}
            (self.out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
        return total


def build_tokenizer(out, vocab, corpus):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    # GPT-2's regex inside ByteLevel: the one pre-tokenizer that tandem, transformers and llama.cpp
    # ("gpt-2") all implement identically.
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=[BOS, EOS], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train(corpus, trainer)
    # A small corpus stops the merges short of `vocab`: the rest become reserved special tokens
    # (as Llama 3 has), so every id the model can emit has a token in every engine's detokenizer.
    spare = vocab - tok.get_vocab_size()
    if spare > 0:
        tok.add_special_tokens([f"<|reserved_{i}|>" for i in range(spare)])
    tok.save(str(out / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": BOS, "eos_token": EOS, "add_bos_token": True, "add_eos_token": False,
        "clean_up_tokenization_spaces": False, "model_max_length": 2048,
        "chat_template": CHAT_TEMPLATE,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    reserved = [i for i in range(tok.get_vocab_size()) if (tok.id_to_token(i) or "").startswith("<|reserved_")]
    return tok.get_vocab_size(), tok.token_to_id(BOS), tok.token_to_id(EOS), reserved


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="f32")
    ap.add_argument("--seed", type=int, default=0)
    shape = {"hidden": 1024, "layers": 16, "heads": 16, "kv-heads": 4, "intermediate": 4096,
             "vocab": 21600, "max-positions": 2048}
    for flag, default in shape.items():
        ap.add_argument(f"--{flag}", type=int, default=default)
    ap.add_argument("--shard-gib", type=float, default=2.0, help="largest safetensors file")
    ap.add_argument("--corpus", nargs="*", default=None, help="text files for the tokenizer")
    a = ap.parse_args()
    if a.hidden % a.heads or a.heads % a.kv_heads:
        sys.exit("hidden must divide by heads, heads by kv-heads")
    a.head_dim = a.hidden // a.heads
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    corpus = a.corpus or default_corpus()
    if not corpus:
        sys.exit("no corpus for the tokenizer: pass --corpus FILE...")

    tok_size, bos, eos, reserved = build_tokenizer(out, a.vocab, corpus)
    if tok_size > a.vocab:
        sys.exit(f"tokenizer has {tok_size} ids, more than --vocab {a.vocab}")

    rng = np.random.default_rng(a.seed)

    def make(name, shape, kind):
        if kind == "norm":
            return np.ones(shape, np.float32)
        w = rng.standard_normal(shape, dtype=np.float32)
        # Variance-preserving scale, so activations stay O(1) through 16 random layers in bf16/f16.
        w *= 1.0 / np.sqrt(shape[1]) if kind in ("linear", "head") else 1.0
        if kind == "head":
            # EOS's logit (and the reserved tokens') pinned at 0, below the row maximum at every
            # step: greedy runs produce the full max_tokens of printable tokens on every engine, so
            # output lengths match without ignore_eos (which tandem's API does not take).
            w[[eos, *reserved]] = 0.0
        return w

    total = ShardWriter(out, tensor_specs(a), a.dtype, int(a.shard_gib * 2**30)).write(make)
    torch_dtype = DTYPES[a.dtype][1]
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": a.hidden, "intermediate_size": a.intermediate,
        "num_hidden_layers": a.layers, "num_attention_heads": a.heads,
        "num_key_value_heads": a.kv_heads, "head_dim": a.head_dim, "vocab_size": a.vocab,
        "max_position_embeddings": a.max_positions, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "hidden_act": "silu", "attention_bias": False, "mlp_bias": False,
        "tie_word_embeddings": False, "initializer_range": 0.02,
        "bos_token_id": bos, "eos_token_id": eos, "torch_dtype": torch_dtype, "dtype": torch_dtype,
    }
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    gen = {"bos_token_id": bos, "eos_token_id": eos, "do_sample": False}
    (out / "generation_config.json").write_text(json.dumps(gen, indent=2) + "\n")
    print(f"{out}: {total / 1e6:.1f}M parameters, {a.dtype}, tokenizer {tok_size} ids, "
          f"{sum(os.path.getsize(p) for p in out.glob('*.safetensors')) / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
