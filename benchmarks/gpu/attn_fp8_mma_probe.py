"""Probe: decode attention over an e4m3 (kv_cache_dtype="fp8") cache with FP8 tensor-core dots, which widen nothing,
against the engine's decode kernel (kernels.attention: fp16 dots over widened tiles, attention_config.kv8_widen).

Why: the engine's e4m3 decode is bound by widening the cache to fp16 (docs/performance.md, stop 58). Triton on sm_90
lowers an e4m3 tl.dot to fp8 warpgroup MMAs (QGMMA) once the query tile has 64 rows (at 16 it widens both operands),
so this kernel pads a KV head's query group (7 rows on Qwen2.5-7B) to BLOCK_M = 64 and gives the dots e4m3 operands:

  Q·Kᵀ   the queries, scaled per row into e4m3's range, as e4m3 (SPLIT_Q: plus the e4m3 residual, a second dot;
         ~7 significant bits instead of 4), against the cache's keys as they lie
  P·V    PV=0: the probabilities scaled by 448 as e4m3 (SPLIT_P: plus the residual) against the values as they lie;
         PV=1: fp16 probabilities against values widened by bit placement (quant_fp8.widen_cache_tile, as cvt:asm's V)

One program per (sequence, KV head), the whole context (no split-KV), online softmax in fp32. A probe, not an engine
path: its rows say whether the form is worth building into the decode kernels (speed against accuracy).

GPU:  python3 benchmarks/gpu/attn_fp8_mma_probe.py --out $OUT    (Qwen2.5-7B heads; graph-replayed µs, error)
CPU:  tests/test_kernels_kv_fp8.py checks decode_fp8_mma against kernels.attention_ref under the interpreter.
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

from tachyon.kernels._triton import tl, triton  # noqa: E402
from tachyon.kernels.quant_fp8 import round_e4m3, widen_cache_tile  # noqa: E402

E4M3_MAX = 448.0


@triton.jit
def _to_e4m3(x, EXACT: tl.constexpr):
    """fp32 -> e4m3, nearest (ties to even), saturated at +-448. EXACT rounds on the fp32 grid first (the interpreter
    mis-rounds some casts: quant_fp8.round_e4m3); compiled code casts directly (one cvt per pair)."""
    x = tl.minimum(tl.maximum(x, -448.0), 448.0)
    if EXACT:
        x = round_e4m3(x)
    return x.to(tl.float8e4nv)


@triton.jit
def _fp8_mma_decode_kernel(
    q_ptr, cache_ptr, out_ptr, seq_lens_ptr, bt_ptr, scale,
    stride_qt, stride_qh, stride_ot, stride_oh, stride_c_kv, stride_c_blk, stride_c_tok, stride_c_h, stride_bt,
    G: tl.constexpr, D: tl.constexpr, PAGE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    SPLIT_Q: tl.constexpr, SPLIT_P: tl.constexpr, PV: tl.constexpr, EXACT: tl.constexpr,
):
    """Program (sequence b, KV head hk): the G query heads of hk (rows past G padding, zero) over b's keys."""
    b = tl.program_id(0)
    hk = tl.program_id(1)
    S = tl.load(seq_lens_ptr + b)
    g = tl.arange(0, BLOCK_M)
    d = tl.arange(0, D)
    gmask = g < G
    heads = hk * G + g
    q = tl.load(q_ptr + b * stride_qt + heads[:, None] * stride_qh + d[None, :], mask=gmask[:, None], other=0.0)
    q = q.to(tl.float32)
    qs = tl.maximum(tl.max(tl.abs(q), 1), 1e-30) / 448.0  # per row: the row's largest value becomes 448
    qn = q / qs[:, None]
    q_hi = _to_e4m3(qn, EXACT)
    q_lo = _to_e4m3(qn - q_hi.to(tl.float32), EXACT)
    row_scale = qs * scale
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    bt_row = bt_ptr + b * stride_bt
    for n0 in range(0, S, BLOCK_N):
        n = n0 + tl.arange(0, BLOCK_N)
        nmask = n < S
        blk = tl.load(bt_row + n // PAGE, mask=nmask, other=0).to(tl.int64)
        off = (blk * stride_c_blk + (n % PAGE) * stride_c_tok + hk * stride_c_h)[:, None] + d[None, :]
        k = tl.load(cache_ptr + off, mask=nmask[:, None], other=0.0)
        s = tl.dot(q_hi, tl.trans(k))
        if SPLIT_Q:
            s += tl.dot(q_lo, tl.trans(k))
        s = tl.where(nmask[None, :], s * row_scale[:, None], float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(cache_ptr + stride_c_kv + off, mask=nmask[:, None], other=0.0)
        if PV == 0:
            pn = p * 448.0
            p_hi = _to_e4m3(pn, EXACT)
            pv = tl.dot(p_hi, v)
            if SPLIT_P:
                pv += tl.dot(_to_e4m3(pn - p_hi.to(tl.float32), EXACT), v)
            acc = acc * alpha[:, None] + pv * (1.0 / 448.0)
        else:  # fp16 P against V placed bit-wise (value / 256: p * 256)
            vw = widen_cache_tile(v, tl.float16, 1 if EXACT else 2)
            acc = acc * alpha[:, None] + tl.dot((p * 256.0).to(tl.float16), vw)
        m_i = m_new
    o = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
    tl.store(out_ptr + b * stride_ot + heads[:, None] * stride_oh + d[None, :], o.to(out_ptr.dtype.element_ty),
             mask=gmask[:, None])


def decode_fp8_mma(q: torch.Tensor, kv_cache: torch.Tensor, seq_lens: torch.Tensor, block_tables: torch.Tensor,
                   scale: float, out: torch.Tensor | None = None, split_q: bool = True, split_p: bool = True,
                   pv: int = 0, block_n: int = 64, num_warps: int = 4, num_stages: int = 2) -> torch.Tensor:
    """One decode token per sequence: q [B, Hq, D] (row b is sequence b's), kv_cache [2, blocks, page, Hkv, D]
    float8_e4m3fn, seq_lens int32 [B] (>= 1), block_tables int32 [B, max_blocks] -> out [B, Hq, D] in q's dtype.
    The result approximates kernels.attention_ref over the same cache (e4m3 operands: see the module docstring)."""
    B, Hq, D = q.shape
    Hkv, page = kv_cache.shape[3], kv_cache.shape[2]
    assert kv_cache.dtype == torch.float8_e4m3fn and kv_cache.is_contiguous() and q.stride(-1) == 1
    assert Hq % Hkv == 0 and D & (D - 1) == 0
    out = torch.empty_like(q) if out is None else out
    _fp8_mma_decode_kernel[(B, Hkv)](
        q, kv_cache, out, seq_lens, block_tables, scale,
        q.stride(0), q.stride(1), out.stride(0), out.stride(1), *kv_cache.stride()[:4], block_tables.stride(0),
        G=Hq // Hkv, D=D, PAGE=page, BLOCK_M=64, BLOCK_N=block_n, SPLIT_Q=split_q, SPLIT_P=split_p, PV=pv,
        EXACT=not q.is_cuda, num_warps=num_warps, num_stages=num_stages,
    )
    return out


VARIANTS = {  # name -> decode_fp8_mma keyword arguments
    "qk8x2_pv8x2": dict(split_q=True, split_p=True, pv=0),
    "qk8x2_pv8": dict(split_q=True, split_p=False, pv=0),
    "qk8_pv8": dict(split_q=False, split_p=False, pv=0),
    "qk8x2_pv16": dict(split_q=True, pv=1),
    "qk8x2_pv8x2_n128": dict(split_q=True, split_p=True, pv=0, block_n=128),
    "qk8x2_pv8x2_w8": dict(split_q=True, split_p=True, pv=0, num_warps=8),
}


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kernels"))
    from timing import graph_time_us, rel_err

    from tachyon import kernels
    from tachyon.kernels.quant_fp8 import cast_to_cache_ref

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("no CUDA device (the CPU check is in tests/test_kernels.py)")
    dev, gen = "cuda", torch.Generator(device="cuda").manual_seed(0)
    Hq, Hkv, D, page = 28, 4, 128, 16
    rows = []
    for B, ctx in ((64, 1024), (256, 1024), (256, 2048)):
        nblk = -(-ctx // page)
        cache = cast_to_cache_ref(torch.randn(2, B * nblk + 1, page, Hkv, D, device=dev, generator=gen),
                                  torch.float8_e4m3fn)
        bt = torch.randperm(B * nblk + 1, device=dev, generator=gen)[:B * nblk].view(B, nblk).to(torch.int32)
        seq = torch.full((B,), ctx, dtype=torch.int32, device=dev)
        q = torch.randn(B, Hq, D, device=dev, generator=gen).to(torch.bfloat16)
        meta = dict(query_start_loc=torch.arange(B + 1, dtype=torch.int32, device=dev), seq_lens=seq,
                    block_tables=bt, max_query_len=1, max_seq_len=ctx, scale=1 / math.sqrt(D))
        ref = kernels.attention_ref(q, cache, **meta)
        eng = torch.empty_like(q)
        forms = {"engine": lambda: kernels.attention_triton(q, cache, **meta, out=eng)}  # noqa: B023
        outs = {"engine": eng}
        for name, kw in VARIANTS.items():
            o = torch.empty_like(q)
            forms[name] = lambda o=o, kw=kw: decode_fp8_mma(q, cache, seq, bt, meta["scale"], out=o, **kw)  # noqa: B023
            outs[name] = o
        for name, fn in forms.items():
            try:
                fn()
                us = graph_time_us(fn)
                row = dict(shape=f"{B}x{ctx}", form=name, graph_us=us, rel_err=rel_err(outs[name], ref))
            except Exception as e:  # noqa: BLE001 - a form that fails to compile is a row, not the end of the run
                row = dict(shape=f"{B}x{ctx}", form=name, error=repr(e)[:400])
            rows.append(row)
            print(json.dumps(row), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "attn_fp8_mma_probe.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
