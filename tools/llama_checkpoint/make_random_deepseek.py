#!/usr/bin/env python3
"""Writes a Hugging Face DeepSeek-V3 checkpoint with random weights, for speed measurements only.

  python3 tools/llama_checkpoint/make_random_deepseek.py OUT_DIR [--dtype f32|bf16|f16] [--seed N]
      [--hidden 1024 --layers 8 --heads 16 --q-lora 384 --kv-lora 256 --experts 16 ...]

The defaults are a 270M-parameter shape with DeepSeek-V3's structure (MLA with a q LoRA, one dense
layer then MoE layers with a shared expert, sigmoid group-limited routing), small enough for these
2-core machines: `tandem_llama_bench OUT_DIR 2 512 32 2 1 auto both` then compares the forward with
row-major and with packed weights. Needs numpy only; the writer is make_random_llama.py's. No
tokenizer: the benchmarks feed token ids.
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_random_llama import DTYPES, ShardWriter  # noqa: E402


def tensor_specs(a):
    """(name, shape, kind) of every tensor tandem's DeepSeek-V3 loader reads."""
    h, nh = a.hidden, a.heads
    yield "model.embed_tokens.weight", (a.vocab, h), "embed"
    for i in range(a.layers):
        p = f"model.layers.{i}."
        yield p + "input_layernorm.weight", (h,), "norm"
        yield p + "self_attn.q_a_proj.weight", (a.q_lora, h), "linear"
        yield p + "self_attn.q_a_layernorm.weight", (a.q_lora,), "norm"
        yield p + "self_attn.q_b_proj.weight", (nh * (a.nope + a.rope), a.q_lora), "linear"
        yield p + "self_attn.kv_a_proj_with_mqa.weight", (a.kv_lora + a.rope, h), "linear"
        yield p + "self_attn.kv_a_layernorm.weight", (a.kv_lora,), "norm"
        yield p + "self_attn.kv_b_proj.weight", (nh * (a.nope + a.v), a.kv_lora), "linear"
        yield p + "self_attn.o_proj.weight", (h, nh * a.v), "linear"
        yield p + "post_attention_layernorm.weight", (h,), "norm"
        if i < a.dense_layers:
            yield from mlp(p + "mlp.", h, a.intermediate)
            continue
        yield p + "mlp.gate.weight", (a.experts, h), "linear"
        yield p + "mlp.gate.e_score_correction_bias", (a.experts,), "zero"
        for e in range(a.experts):
            yield from mlp(p + f"mlp.experts.{e}.", h, a.moe_intermediate)
        yield from mlp(p + "mlp.shared_experts.", h, a.moe_intermediate * a.shared)
    yield "model.norm.weight", (h,), "norm"
    yield "lm_head.weight", (a.vocab, h), "linear"


def mlp(prefix, h, inter):
    yield prefix + "gate_proj.weight", (inter, h), "linear"
    yield prefix + "up_proj.weight", (inter, h), "linear"
    yield prefix + "down_proj.weight", (h, inter), "linear"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    ap.add_argument("--seed", type=int, default=0)
    shape = {"hidden": 1024, "layers": 8, "dense-layers": 1, "heads": 16, "q-lora": 384,
             "kv-lora": 256, "nope": 64, "rope": 32, "v": 64, "intermediate": 2816,
             "moe-intermediate": 512, "experts": 16, "experts-per-token": 4, "groups": 4,
             "topk-groups": 2, "shared": 1, "vocab": 21600, "max-positions": 4096}
    for flag, default in shape.items():
        ap.add_argument(f"--{flag}", type=int, default=default)
    ap.add_argument("--shard-gib", type=float, default=2.0, help="largest safetensors file")
    a = ap.parse_args()
    if a.experts % a.groups or a.topk_groups > a.groups:
        sys.exit("experts must divide by groups, and topk-groups be at most groups")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(a.seed)

    def make(name, shape, kind):
        if kind == "norm":
            return np.ones(shape, np.float32)
        if kind == "zero":
            return np.zeros(shape, np.float32)
        w = rng.standard_normal(shape, dtype=np.float32)
        return w * (1.0 / np.sqrt(shape[1])) if kind == "linear" else w

    total = ShardWriter(out, tensor_specs(a), a.dtype, int(a.shard_gib * 2**30)).write(make)
    torch_dtype = DTYPES[a.dtype][1]
    config = {
        "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
        "hidden_size": a.hidden, "intermediate_size": a.intermediate,
        "moe_intermediate_size": a.moe_intermediate, "num_hidden_layers": a.layers,
        "first_k_dense_replace": a.dense_layers, "num_attention_heads": a.heads,
        "num_key_value_heads": a.heads, "q_lora_rank": a.q_lora, "kv_lora_rank": a.kv_lora,
        "qk_nope_head_dim": a.nope, "qk_rope_head_dim": a.rope, "v_head_dim": a.v,
        "qk_head_dim": a.nope + a.rope, "head_dim": a.rope,
        "n_routed_experts": a.experts, "n_shared_experts": a.shared,
        "num_experts_per_tok": a.experts_per_token, "n_group": a.groups,
        "topk_group": a.topk_groups, "norm_topk_prob": True, "routed_scaling_factor": 2.5,
        "scoring_func": "sigmoid", "topk_method": "noaux_tc", "vocab_size": a.vocab,
        "max_position_embeddings": a.max_positions, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
        "rope_interleave": True, "hidden_act": "silu", "attention_bias": False,
        "tie_word_embeddings": False, "num_nextn_predict_layers": 0, "bos_token_id": 0,
        "eos_token_id": 1, "torch_dtype": torch_dtype, "dtype": torch_dtype,
    }
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    size = sum(p.stat().st_size for p in out.glob("*.safetensors")) / 2**20
    print(f"{out}: {total / 1e6:.1f}M parameters, {a.dtype}, {size:.0f} MiB")


if __name__ == "__main__":
    main()
