"""A vision tower in torch on a checkpoint from make_vision_fixtures.py --realistic: the V4.1
tower of tools/fixtures/v41_vision_reference.py, or DeepSeek-VL through transformers'
DeepseekVLForConditionalGeneration.get_image_features (both float32, eager). Encode time per size
with the same thread count as tandem_vision_bench, and, given tandem's dumped rows, their worst row
relative error.

  TANDEM_VISION_DUMP=/tmp/vis/tandem build/tests/perf/tandem_vision_bench DIR/v41 2 1 546x546
  ~/.cache/tandem-peers/venv/bin/python tests/perf/vision_torch_bench.py DIR/v41 2 546x546 \
      --tandem-dump /tmp/vis/tandem
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch
from safetensors.torch import load_file

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "tools", "fixtures"))
import v41_vision_reference as v41  # noqa: E402
from make_vision_fixtures import pattern_image  # noqa: E402


def deepseek_vl_encoder(path, weights):
    from transformers import DeepseekVLConfig, DeepseekVLForConditionalGeneration

    model = DeepseekVLForConditionalGeneration(DeepseekVLConfig.from_pretrained(path)).eval()
    missing, _ = model.load_state_dict(weights, strict=False)
    assert not [k for k in missing if "vision_model" in k or "aligner" in k], missing
    with open(os.path.join(path, "preprocessor_config.json")) as f:
        pre = json.load(f)
    mean = torch.tensor(pre["image_mean"])[:, None, None]
    std = torch.tensor(pre["image_std"])[:, None, None]

    @torch.no_grad()
    def encode(img):
        pixels = ((img.permute(2, 0, 1).float() * pre["rescale_factor"] - mean) / std)[None]
        return model.model.get_image_features(pixel_values=pixels).pooler_output[0]

    return encode


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("threads", type=int)
    ap.add_argument("sizes", nargs="+")
    ap.add_argument("--tandem-dump", help="prefix given to tandem_vision_bench's TANDEM_VISION_DUMP")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    with open(os.path.join(args.dir, "config.json")) as f:
        config = json.load(f)
    weights = {k: v.float() for k, v in load_file(os.path.join(args.dir, "model.safetensors")).items()}
    if config["model_type"] == "deepseek_vl":
        encode = deepseek_vl_encoder(args.dir, weights)
    else:
        model = v41.V41VisionTower(config).eval()
        model.load_state_dict(weights)
        encode = model
    for size in args.sizes:
        w, h = (int(v) for v in size.split("x"))
        img = pattern_image(w, h, 0)
        start = time.perf_counter()
        rows = encode(img)
        elapsed = time.perf_counter() - start
        line = f"{size}: rows {rows.shape[0]}  torch {elapsed:.2f} s ({args.threads} threads)"
        if args.tandem_dump:
            got = np.fromfile(f"{args.tandem_dump}_{size}.f32", dtype="<f4").reshape(rows.shape)
            want = rows.numpy()
            err = (np.abs(got - want).max(axis=1) / np.abs(want).max(axis=1)).max()
            line += f"  tandem vs torch: worst row relative error {err:.3g}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
