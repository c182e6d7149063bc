"""Decode attention from the qkv projection: the fused kernel (decode_fused.py) against qkv_post + attention,
graph-timed alone and behind the batch-1 qkv GEMV that precedes it in a decode step (PDL neighbours as in
the engine). Qwen2.5-7B and Qwen3-0.6B attention shapes, B 1 and 8, 512-token contexts, split count as a
graph captured at max_seq_len 4096 picks it.

Usage (GPU machine, repo root): python3 benchmarks/kernels/decode_fused_timing.py --out $OUT
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from timing import env, graph_time_us, rel_err  # noqa: E402

from tachyon import kernels as K  # noqa: E402

# name -> (Hq, Hkv, qk_norm, hidden, qkv GEMV config)
SHAPES = {"qwen2.5-7b": (28, 4, False, 3584, (2, 2048, 4, 1)),
          "qwen3-0.6b": (16, 8, True, 1024, (4, 1024, 4, 1))}
D, PAGE, CTX, MAX_LEN = 128, 16, 512, 4096


def case(shape: str, B: int) -> dict:
    Hq, Hkv, norm, hidden, _ = SHAPES[shape]
    dev, dt = "cuda", torch.bfloat16
    nblk = CTX // PAGE
    tables = torch.arange(B * nblk, dtype=torch.int32, device=dev).view(B, nblk)
    seq = torch.full((B,), CTX, dtype=torch.int32, device=dev)
    slots = (tables[:, -1].long() * PAGE + PAGE - 1)
    inv_freq = 1.0 / (1e6 ** (torch.arange(0, D, 2, dtype=torch.float32) / D))
    w = (1 + 0.1 * torch.randn(D, device=dev)).to(dt) if norm else None
    return dict(
        qkv=torch.randn(B, (Hq + 2 * Hkv) * D, device=dev, dtype=dt),
        cos_sin_cache=K.rope_cos_sin_cache(inv_freq, MAX_LEN).to(dev),
        kv_cache=torch.randn(2, B * nblk + 1, PAGE, Hkv, D, device=dev, dtype=dt),
        slot_mapping=slots, q_norm_weight=w, k_norm_weight=w, eps=1e-6, num_heads=Hq, num_kv_heads=Hkv,
        head_dim=D, query_start_loc=torch.arange(B + 1, dtype=torch.int32, device=dev), seq_lens=seq,
        block_tables=tables, max_seq_len=MAX_LEN, scale=1 / math.sqrt(D),
    )


def two_op(c: dict) -> torch.Tensor:
    q = K.qkv_post_triton(c["qkv"], c["seq_lens"].long() - 1, c["cos_sin_cache"], c["kv_cache"], c["slot_mapping"],
                          c["q_norm_weight"], c["k_norm_weight"], c["eps"], c["num_heads"], c["num_kv_heads"], D)
    return K.attention_triton(q, c["kv_cache"], c["query_start_loc"], c["seq_lens"], c["block_tables"], 1,
                              c["max_seq_len"], c["scale"])


def fused(c: dict) -> torch.Tensor:
    return K.decode_qkv_attention_triton(**c)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="out")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for shape, (_, _, _, hidden, cfg) in SHAPES.items():
        for B in (1, 8):
            c = case(shape, B)
            x = torch.randn(B, hidden, device="cuda", dtype=torch.bfloat16)
            w = torch.randn(c["qkv"].shape[1], hidden, device="cuda", dtype=torch.bfloat16) * 0.02

            def project(x=x, w=w, B=B, cfg=cfg) -> torch.Tensor:
                return K.gemv_triton(x, w, None, cfg) if B == 1 else torch.nn.functional.linear(x, w)
            ref = two_op(c)
            for name, fn in (("two_op", two_op), ("fused", fused)):
                err = rel_err(fn(c), ref)
                alone = graph_time_us(lambda fn=fn, c=c: fn(c))
                behind = graph_time_us(lambda fn=fn, c=c, project=project: fn(dict(c, qkv=project())))
                proj = graph_time_us(project)
                rows.append(dict(shape=shape, B=B, variant=name, alone_us=alone, with_qkv_gemv_us=behind,
                                 qkv_gemv_us=proj, rel_err=err))
                print(f"{shape} B={B} {name:10s} alone {alone:.2f} us  behind qkv GEMV {behind:.2f} us "
                      f"(GEMV alone {proj:.2f})  rel err {err:.1e}", flush=True)
    (out / "decode_fused_timing.json").write_text(json.dumps(dict(env=env(Path(__file__).parents[2]), rows=rows),
                                                             indent=1))


if __name__ == "__main__":
    main()
