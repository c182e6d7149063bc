"""The decode kernels' dispatch order by batch and context spread. The dedicated decode kernel: for decode-only
steps as the decode graphs run them (a bucket of sequences, those past the real ones padding with one key), one
layer's attention in batch order on the default grid (`batch`: sequences fastest), in batch order on the ordered grid
(`heads`: every KV head of one sequence together, the grid TACHYON_DECODE_ORDER=lpt uses) and longest first on it
(`lpt`). `heads` separates the grid's effect from the order's. Each is timed as CUDA graphs of 28 calls (a step's
layers), replayed (mixed_attn_tiles.time_graph); µs per call, beside the KV-byte floor at 4.25 TB/s. Outputs are
compared with `batch`'s on the real rows. `--fused-batches` runs the same three forms through the fused decode kernel
(decode_qkv_attention, which the engine takes for split launches of two or more sequences, i.e. the small buckets),
each sequence's new key stored at its last position.

Usage (GPU machine, repo root): python3 benchmarks/gpu/decode_order_sweep.py --out DIR
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from benchmarks.gpu.mixed_attn_tiles import build, time_graph  # noqa: E402
from tachyon import kernels  # noqa: E402

SHAPES = {"qwen2.5-7b": (28, 4), "qwen3-0.6b": (16, 8)}  # query heads, KV heads; head dim 128


def orders(lens: torch.Tensor) -> dict[str, torch.Tensor | None]:
    """The three dispatch forms' decode_order over a bucket's seq_lens."""
    n = lens.numel()
    return {"batch": None, "heads": torch.arange(n, dtype=torch.int32, device=lens.device),
            "lpt": torch.argsort(-lens, stable=True).to(torch.int32)}


def time_forms(call, lens: torch.Tensor, decodes: int) -> dict:
    """The three forms of one step: call(order) runs the kernel and returns its output; µs per layer (graph-timed)
    and max abs difference from `batch`'s output on the first `decodes` rows."""
    forms, ref = {}, None
    for form, order in orders(lens).items():
        us = time_graph(lambda order=order: call(order))
        out = call(order)
        ref = out if ref is None else ref
        forms[form] = dict(us=round(us, 2), max_abs_diff=(out[:decodes].float() - ref[:decodes].float()).abs().max()
                           .item())
    return forms


def measure(shape: str, decodes: int, bucket: int, lo: int, hi: int, max_seq_len: int) -> dict:
    """One decode-only step's three forms through the dedicated decode kernel, beside its KV-byte floor."""
    hq, hkv = SHAPES[shape]
    s = build(decodes, bucket, [(0, 1)], 16, lo, hi, Hq=hq, Hkv=hkv)
    lens = s["decode_seq_lens"]
    floor = sum(lens[:decodes].tolist()) * 2 * hkv * 128 * 2 / 4.25e12 * 1e6

    def call(order):
        return kernels.attention(s["q"], s["kv_cache"], s["decode_qsl"], lens, s["decode_block_tables"], 1,
                                 max_seq_len, s["scale"], decode_order=order)

    row = dict(kernel="decode", shape=shape, decodes=decodes, bucket=bucket, ctx=f"{lo}:{hi}",
               kv_floor_us=round(floor, 2), forms=time_forms(call, lens, decodes))
    print(json.dumps(row), flush=True)
    return row


def fused_inputs(s: dict, hq: int, hkv: int, norm: bool, max_seq_len: int) -> dict:
    """decode_qkv_attention's arguments for build()'s decode part (every bucket row a sequence; the new key of each
    at its last position, padding rows' at slot -1): random qkv rows, Qwen-style rotary, qk-norm weights for Qwen3."""
    dev, bucket, D = s["q"].device, s["decode_seq_lens"].numel(), 128
    lens, tables = s["decode_seq_lens"], s["decode_block_tables"]
    last = (lens - 1).long()
    slots = tables.gather(1, (last // 16).unsqueeze(1)).squeeze(1).long() * 16 + last % 16
    slots[s["decodes"]:] = -1  # padding rows store nothing, as in the decode graphs (their tables name block 0)
    inv_freq = 1.0 / (1e6 ** (torch.arange(0, D, 2, dtype=torch.float32) / D))
    w = (1 + 0.1 * torch.randn(D, device=dev)).to(torch.bfloat16) if norm else None
    return dict(qkv=torch.randn(bucket, (hq + 2 * hkv) * D, device=dev, dtype=torch.bfloat16),
                cos_sin_cache=kernels.rope_cos_sin_cache(inv_freq, max_seq_len).to(dev), kv_cache=s["kv_cache"],
                slot_mapping=slots, q_norm_weight=w, k_norm_weight=w, eps=1e-6, num_heads=hq, num_kv_heads=hkv,
                head_dim=D, query_start_loc=s["decode_qsl"], seq_lens=lens, block_tables=tables,
                max_seq_len=max_seq_len, scale=1 / math.sqrt(D))


def measure_fused(shape: str, decodes: int, bucket: int, lo: int, hi: int, max_seq_len: int) -> dict:
    """One small decode-only step's three forms through the fused kernel (as `measure`)."""
    hq, hkv = SHAPES[shape]
    s = build(decodes, bucket, [(0, 1)], 16, lo, hi, Hq=hq, Hkv=hkv)
    args = fused_inputs(s, hq, hkv, shape == "qwen3-0.6b", max_seq_len)
    splits = kernels.decode_kv_splits(bucket, hkv, max_seq_len, s["q"].device)
    forms = time_forms(lambda order: kernels.decode_qkv_attention(**args, decode_order=order), args["seq_lens"],
                       decodes)
    row = dict(kernel="fused", shape=shape, decodes=decodes, bucket=bucket, ctx=f"{lo}:{hi}", splits=splits,
               forms=forms)
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="out")
    ap.add_argument("--batches", default="24/32,48/48,64/64,90/96,96/96,120/128,146/160,160/160,200/224,250/256",
                    help="decodes/bucket, comma-separated")
    ap.add_argument("--ctx", default="200:1600,100:800,600:1000,1000:3000", help="context ranges lo:hi")
    ap.add_argument("--shapes", default="qwen2.5-7b,qwen3-0.6b")
    ap.add_argument("--max-seq-len", type=int, default=4096, help="as the decode graphs pass it (max_model_len)")
    ap.add_argument("--fused-batches", default="", help="decodes/bucket for the fused kernel, e.g. 2/2,8/8,30/32")
    args = ap.parse_args()
    rows = []
    for spec in filter(None, args.fused_batches.split(",")):
        d, b = (int(v) for v in spec.split("/"))
        for shape in args.shapes.split(","):
            for ctx in args.ctx.split(","):
                lo, hi = (int(v) for v in ctx.split(":"))
                rows.append(measure_fused(shape, d, b, lo, hi, args.max_seq_len))
    for shape in args.shapes.split(","):
        ctxs = args.ctx.split(",") if shape == "qwen2.5-7b" else args.ctx.split(",")[:1]
        for ctx in ctxs:
            lo, hi = (int(v) for v in ctx.split(":"))
            for spec in filter(None, args.batches.split(",")):
                d, b = (int(v) for v in spec.split("/"))
                rows.append(measure(shape, d, b, lo, hi, args.max_seq_len))
    res = dict(results=rows, gpu=torch.cuda.get_device_name(), torch=torch.__version__,
               git=os.environ.get("TACHYON_GIT_SHA"))
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "decode_order_sweep.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
