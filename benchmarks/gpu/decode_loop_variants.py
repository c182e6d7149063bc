"""How the decode attention's key loop issues its loads: an experiment beside the engine's kernel.

The engine's decode programs (attention.py's _attend_tile, shared by the decode and mixed kernels) load a key tile,
take its scores and softmax, then load the value tile: two memory round trips a tile, nothing in flight across
tiles (Triton does not multi-buffer these gathered loads: the shared memory does not grow with num_stages). This
script's kernel is that loop (one program per sequence and KV head, longest first, no split) in three forms:

  0  as the engine: K, scores, softmax, V
  1  K and V issued together at the top of each tile
  2  the next tile's K and V issued before this tile's math (one tile in flight across iterations)

timed as CUDA graphs of 28 calls (a step's layers) on decode batches shaped like a flat 7B step's (contexts uniform
in [200, 1600]) and on uniform long contexts, against the engine's kernel (longest first; launched with PDL as in the
engine, and without: TACHYON_PDL=0, as this script's kernel) and the KV-byte floor at 4.25 TB/s. Every form's output
is compared with the engine's.

Usage (GPU machine, repo root): python3 benchmarks/gpu/decode_loop_variants.py --out DIR
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from benchmarks.gpu.mixed_attn_tiles import shuffled_block_tables  # noqa: E402
from benchmarks.gpu.prefill_attn_sweep import time_call  # noqa: E402
from tachyon import kernels  # noqa: E402
from tachyon.kernels._triton import tl, triton  # noqa: E402


@triton.jit
def _tile_offsets(bt_row, n, S, hk, stride_c_blk, stride_c_tok, stride_c_h, PAGE: tl.constexpr):
    blk = tl.load(bt_row + n // PAGE, mask=n < S, other=0).to(tl.int64)
    return blk * stride_c_blk + (n % PAGE) * stride_c_tok + hk * stride_c_h


@triton.jit
def _decode_variant_kernel(
    q_ptr, cache_ptr, out_ptr, seq_lens_ptr, bt_ptr, order_ptr, scale,
    stride_qt, stride_qh, stride_ot, stride_oh, stride_c_kv, stride_c_blk, stride_c_tok, stride_c_h, stride_bt,
    G: tl.constexpr, D: tl.constexpr, PAGE: tl.constexpr, BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr,
    VARIANT: tl.constexpr,
):
    hk = tl.program_id(0)
    b = tl.load(order_ptr + tl.program_id(1))
    S = tl.load(seq_lens_ptr + b)
    g = tl.arange(0, BLOCK_G)
    d = tl.arange(0, D)
    gmask = g < G
    heads = hk * G + g
    q = tl.load(q_ptr + b * stride_qt + heads[:, None] * stride_qh + d[None, :], mask=gmask[:, None], other=0.0)
    m_i = tl.full([BLOCK_G], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_G], tl.float32)
    acc = tl.zeros([BLOCK_G, D], tl.float32)
    bt_row = bt_ptr + b * stride_bt
    if VARIANT == 2:
        n = tl.arange(0, BLOCK_N)
        off = _tile_offsets(bt_row, n, S, hk, stride_c_blk, stride_c_tok, stride_c_h, PAGE)[:, None] + d[None, :]
        k = tl.load(cache_ptr + off, mask=(n < S)[:, None], other=0.0)
        v = tl.load(cache_ptr + stride_c_kv + off, mask=(n < S)[:, None], other=0.0)
        for n0 in range(0, S, BLOCK_N):
            nn = n0 + BLOCK_N + tl.arange(0, BLOCK_N)
            off_n = _tile_offsets(bt_row, nn, S, hk, stride_c_blk, stride_c_tok, stride_c_h, PAGE)[:, None] + d[None, :]
            k_n = tl.load(cache_ptr + off_n, mask=(nn < S)[:, None], other=0.0)
            v_n = tl.load(cache_ptr + stride_c_kv + off_n, mask=(nn < S)[:, None], other=0.0)
            n = n0 + tl.arange(0, BLOCK_N)
            s = tl.dot(q, tl.trans(k)) * scale
            s = tl.where((n < S)[None, :], s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            p = tl.exp(s - m_new[:, None])
            alpha = tl.exp(m_i - m_new)
            l_i = l_i * alpha + tl.sum(p, 1)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            m_i = m_new
            k = k_n
            v = v_n
    else:
        for n0 in range(0, S, BLOCK_N):
            n = n0 + tl.arange(0, BLOCK_N)
            off = _tile_offsets(bt_row, n, S, hk, stride_c_blk, stride_c_tok, stride_c_h, PAGE)[:, None] + d[None, :]
            k = tl.load(cache_ptr + off, mask=(n < S)[:, None], other=0.0)
            if VARIANT == 1:
                v = tl.load(cache_ptr + stride_c_kv + off, mask=(n < S)[:, None], other=0.0)
            s = tl.dot(q, tl.trans(k)) * scale
            s = tl.where((n < S)[None, :], s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            p = tl.exp(s - m_new[:, None])
            alpha = tl.exp(m_i - m_new)
            l_i = l_i * alpha + tl.sum(p, 1)
            if VARIANT == 0:
                v = tl.load(cache_ptr + stride_c_kv + off, mask=(n < S)[:, None], other=0.0)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            m_i = m_new
    o = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
    dst = out_ptr + b * stride_ot + heads[:, None] * stride_oh + d[None, :]
    tl.store(dst, o.to(out_ptr.dtype.element_ty), mask=gmask[:, None])


def decode_variant(q, cache, seq_lens, tables, order, scale, out, variant: int, block_n: int, warps: int,
                   stages: int) -> None:
    """One launch of the experiment's kernel: sequence b's one query is row b of q; programs (KV head, order[i])."""
    Hq, D = q.shape[1], q.shape[2]
    Hkv, page = cache.shape[3], cache.shape[2]
    G = Hq // Hkv
    _decode_variant_kernel[(Hkv, seq_lens.shape[0])](
        q, cache, out, seq_lens, tables, order, scale, q.stride(0), q.stride(1), out.stride(0), out.stride(1),
        cache.stride(0), cache.stride(1), cache.stride(2), cache.stride(3), tables.stride(0),
        G=G, D=D, PAGE=page, BLOCK_G=max(16, triton.next_power_of_2(G)), BLOCK_N=block_n, VARIANT=variant,
        num_warps=warps, num_stages=stages)


def batch(lens: list[int], Hq: int = 28, Hkv: int = 4, D: int = 128, page: int = 16, seed: int = 0) -> dict:
    """A decode batch on the GPU (bf16): one query per sequence, every sequence's keys in shuffled cache blocks."""
    gen = torch.Generator().manual_seed(seed)
    tables, nblk = shuffled_block_tables(lens, page, gen)
    dev = torch.device("cuda")
    seq_lens = torch.tensor(lens, dtype=torch.int32)
    return dict(
        q=torch.randn(len(lens), Hq, D, generator=gen).to(torch.bfloat16).to(dev),
        cache=(torch.randn(2, nblk, page, Hkv, D, generator=gen) * 0.5).to(torch.bfloat16).to(dev),
        seq_lens=seq_lens.to(dev), tables=tables.to(dev), qsl=torch.arange(len(lens) + 1, dtype=torch.int32).to(dev),
        order=torch.argsort(-seq_lens, stable=True).to(torch.int32).to(dev), scale=D ** -0.5, max_len=max(lens),
        kv_bytes=sum(lens) * 2 * Hkv * D * 2)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="out")
    ap.add_argument("--configs", default="0:128:4:2,1:128:4:2,2:64:4:1,2:64:4:2,0:64:4:2,2:32:4:1,2:128:8:1,0:128:8:2",
                    help="variant:BLOCK_N:num_warps:num_stages, comma-separated")
    args = ap.parse_args()
    rng = random.Random(0)
    cases = {f"{n} x U[200,1600]": [rng.randint(200, 1600) for _ in range(n)] for n in (96, 146, 200, 256)}
    cases["64 x 4096"] = [4096] * 64
    cases["256 x 1024"] = [1024] * 256
    configs = [tuple(int(v) for v in c.split(":")) for c in args.configs.split(",")]
    results = []
    for name, lens in cases.items():
        s = batch(lens)
        ref = torch.zeros_like(s["q"])

        def engine(out=ref, s=s):
            kernels.attention(s["q"], s["cache"], s["qsl"], s["seq_lens"], s["tables"], 1, s["max_len"], s["scale"],
                              out=out, decode_order=s["order"])
        row = dict(case=name, kv_floor_us=round(s["kv_bytes"] / 4.25e12 * 1e6, 2),
                   engine_us=round(sorted(time_call(engine, 28, 60) for _ in range(3))[1], 2), forms={})
        os.environ["TACHYON_PDL"] = "0"  # the engine's kernel launched as this script's: no programmatic launch
        row["engine_no_pdl_us"] = round(sorted(time_call(engine, 28, 60) for _ in range(3))[1], 2)
        os.environ.pop("TACHYON_PDL")
        for variant, bn, warps, stages in configs:
            out = torch.zeros_like(s["q"])
            key = f"v{variant}:{bn}:{warps}:{stages}"
            try:
                def fn(out=out, variant=variant, bn=bn, warps=warps, stages=stages, s=s):
                    decode_variant(s["q"], s["cache"], s["seq_lens"], s["tables"], s["order"], s["scale"], out,
                                   variant, bn, warps, stages)
                us = sorted(time_call(fn, 28, 60) for _ in range(3))[1]
                row["forms"][key] = dict(us=round(us, 2),
                                         max_abs_diff=(out.float() - ref.float()).abs().max().item())
            except Exception as e:  # a form Triton cannot build is a result, not a crash
                row["forms"][key] = dict(error=f"{type(e).__name__}: {str(e)[:200]}")
            print(name, "floor", row["kv_floor_us"], "engine", row["engine_us"], "no PDL", row["engine_no_pdl_us"], key,
                  row["forms"][key], flush=True)
        results.append(row)
    res = dict(results=results, gpu=torch.cuda.get_device_name(), torch=torch.__version__,
               git=os.environ.get("TACHYON_GIT_SHA"))
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "decode_loop_variants.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
