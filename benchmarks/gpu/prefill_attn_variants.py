"""Prefill attention: the engine's Triton kernel against experimental forms of it, to find what bounds it (the
kernel table has it at ~26% of its FLOP floor at 1 x 4,096 causal on Qwen2.5-7B).

Forms (each one sequence batch of new tokens, no cached prefix, bf16, head dim 128, 16-token pages):
- `engine`: tachyon.kernels.attention.attention_triton under each TACHYON_PREFILL_TILE candidate;
- `v2` with PACK (a program's M tile packs BLOCK_Q tokens x the KV head's G query heads, as the engine's kernel
  does) or one query head per program; CONTIG (K/V read from contiguous [T, Hkv, D] tensors, no block table) or
  paged; always exp2 with the scale folded in and no masks on the tiles below the causal diagonal.
Every form's output is checked against the engine kernel's before it is timed (max abs error printed). Calls are
timed inside a CUDA graph (10 calls per replay), as the engine's prefill graphs run them; TFLOP/s counts the causal
half: 4 * D * Hq * sum(L (L + 1) / 2).

Usage (GPU machine, repo root): python3 benchmarks/gpu/prefill_attn_variants.py --out $OUT
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import json
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from benchmarks.gpu.prefill_attn_sweep import time_call  # noqa: E402

attn = importlib.import_module("tachyon.kernels.attention")
HEADS = {"qwen2.5-7b": (28, 4), "qwen3-0.6b": (16, 8)}
D, PAGE = 128, 16
LOG2E = 1.4426950408889634


@triton.jit
def _v2_tile(acc, m_i, l_i, q, k_base, v_base, bt_row, n0, kv_end, pos, d, qk_scale, stride_tok, stride_blk,
             PAGE: tl.constexpr, BLOCK_N: tl.constexpr, MASK: tl.constexpr, CONTIG: tl.constexpr):
    n = n0 + tl.arange(0, BLOCK_N)
    if CONTIG:
        off = n.to(tl.int64) * stride_tok
    else:
        blk = tl.load(bt_row + n // PAGE, mask=n < kv_end, other=0).to(tl.int64)
        off = blk * stride_blk + (n % PAGE) * stride_tok
    if MASK:
        k = tl.load(k_base + off[:, None] + d[None, :], mask=(n < kv_end)[:, None], other=0.0)
    else:
        k = tl.load(k_base + off[:, None] + d[None, :])
    s = tl.dot(q, tl.trans(k)) * qk_scale
    if MASK:
        s = tl.where((n[None, :] <= pos[:, None]) & (n < kv_end)[None, :], s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    p = tl.math.exp2(s - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, 1)
    if MASK:
        v = tl.load(v_base + off[:, None] + d[None, :], mask=(n < kv_end)[:, None], other=0.0)
    else:
        v = tl.load(v_base + off[:, None] + d[None, :])
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
    return acc, m_new, l_i


@triton.jit
def _v2_kernel(q_ptr, k_ptr, v_ptr, out_ptr, qsl_ptr, seq_lens_ptr, bt_ptr, qk_scale,
               stride_qt, stride_qh, stride_ot, stride_oh, stride_tok, stride_blk, stride_h, stride_bt,
               G: tl.constexpr, D: tl.constexpr, PAGE: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_G: tl.constexpr,
               BLOCK_N: tl.constexpr, PACK: tl.constexpr, CONTIG: tl.constexpr):
    qb = tl.num_programs(0) - 1 - tl.program_id(0)
    b = tl.program_id(1)
    q_start = tl.load(qsl_ptr + b)
    q_len = tl.load(qsl_ptr + b + 1) - q_start
    if qb * BLOCK_Q < q_len:
        S = tl.load(seq_lens_ptr + b)
        ctx = S - q_len
        r = tl.arange(0, BLOCK_Q * BLOCK_G)
        if PACK:
            hk = tl.program_id(2)
            i = qb * BLOCK_Q + r // BLOCK_G
            g = r % BLOCK_G
            heads = hk * G + g
            rmask = (i < q_len) & (g < G)
        else:
            heads = tl.program_id(2) + r * 0
            hk = tl.program_id(2) // G
            i = qb * BLOCK_Q + r
            rmask = i < q_len
        d = tl.arange(0, D)
        rows = (q_start + i).to(tl.int64)
        q = tl.load(q_ptr + rows[:, None] * stride_qt + heads[:, None] * stride_qh + d[None, :],
                    mask=rmask[:, None], other=0.0)
        pos = ctx + i
        kv_end = tl.minimum(S, ctx + (qb + 1) * BLOCK_Q)
        full_end = tl.minimum((ctx + qb * BLOCK_Q + 1) // BLOCK_N * BLOCK_N, kv_end)
        m_i = tl.full([BLOCK_Q * BLOCK_G], float("-inf"), tl.float32)
        l_i = tl.zeros([BLOCK_Q * BLOCK_G], tl.float32)
        acc = tl.zeros([BLOCK_Q * BLOCK_G, D], tl.float32)
        if CONTIG:
            k_base = k_ptr + q_start.to(tl.int64) * stride_tok + hk * stride_h
            v_base = v_ptr + q_start.to(tl.int64) * stride_tok + hk * stride_h
        else:
            k_base = k_ptr + hk * stride_h
            v_base = v_ptr + hk * stride_h
        bt_row = bt_ptr + b * stride_bt
        for n0 in range(0, full_end, BLOCK_N):
            acc, m_i, l_i = _v2_tile(acc, m_i, l_i, q, k_base, v_base, bt_row, n0, kv_end, pos, d, qk_scale,
                                     stride_tok, stride_blk, PAGE, BLOCK_N, False, CONTIG)
        for n0 in range(full_end, kv_end, BLOCK_N):
            acc, m_i, l_i = _v2_tile(acc, m_i, l_i, q, k_base, v_base, bt_row, n0, kv_end, pos, d, qk_scale,
                                     stride_tok, stride_blk, PAGE, BLOCK_N, True, CONTIG)
        o = acc / l_i[:, None]
        tl.store(out_ptr + rows[:, None] * stride_ot + heads[:, None] * stride_oh + d[None, :],
                 o.to(out_ptr.dtype.element_ty), mask=rmask[:, None])


def case(hq: int, hkv: int, lens: list[int], dev: torch.device, dtype: torch.dtype = torch.bfloat16) -> dict:
    """Inputs of one prefill call: sequences of `lens` new tokens, pages in shuffled order; the same K/V also
    as contiguous [T, Hkv, D] tensors."""
    T = sum(lens)
    pages = [-(-n // PAGE) for n in lens]
    nblk = sum(pages) + 1
    cache = torch.randn(2, nblk, PAGE, hkv, D, device=dev, dtype=dtype)
    perm = torch.randperm(nblk - 1, device=dev).to(torch.int32) + 1
    table = torch.zeros(len(lens), max(pages), dtype=torch.int32, device=dev)
    k = torch.empty(T, hkv, D, device=dev, dtype=dtype)
    v = torch.empty_like(k)
    page0 = tok0 = 0
    for i, (n, p) in enumerate(zip(lens, pages, strict=True)):
        table[i, :p] = perm[page0: page0 + p]
        blocks = cache[:, table[i, :p].long()].reshape(2, p * PAGE, hkv, D)[:, :n]
        k[tok0: tok0 + n], v[tok0: tok0 + n] = blocks[0], blocks[1]
        page0, tok0 = page0 + p, tok0 + n
    qsl = torch.tensor([0] + list(itertools.accumulate(lens)), dtype=torch.int32, device=dev)
    seq_lens = torch.tensor(lens, dtype=torch.int32, device=dev)
    q = torch.randn(T, hq, D, device=dev, dtype=dtype)
    return dict(q=q, cache=cache, table=table, k=k, v=v, qsl=qsl, seq_lens=seq_lens, lens=lens, hq=hq, hkv=hkv)


def engine_fn(c: dict, out: torch.Tensor):
    return lambda: attn.attention_triton(c["q"], c["cache"], c["qsl"], c["seq_lens"], c["table"], max(c["lens"]),
                                         max(c["lens"]), D ** -0.5, out=out)


def v2_fn(c: dict, out: torch.Tensor, block_m: int, block_n: int, warps: int, stages: int, pack: bool,
          contig: bool):
    hq, hkv = c["hq"], c["hkv"]
    G = hq // hkv
    block_g = triton.next_power_of_2(G) if pack else 1
    block_q = max(1, block_m // block_g)
    grid = (triton.cdiv(max(c["lens"]), block_q), len(c["lens"]), hkv if pack else hq)
    if contig:
        k, v, s_tok, s_blk, s_h = c["k"], c["v"], c["k"].stride(0), 0, c["k"].stride(1)
    else:
        cache = c["cache"]
        k, v, s_tok, s_blk, s_h = cache[0], cache[1], cache.stride(2), cache.stride(1), cache.stride(3)
    q = c["q"]

    def fn():
        _v2_kernel[grid](q, k, v, out, c["qsl"], c["seq_lens"], c["table"], D ** -0.5 * LOG2E,
                         q.stride(0), q.stride(1), out.stride(0), out.stride(1), s_tok, s_blk, s_h,
                         c["table"].stride(0), G=G, D=D, PAGE=PAGE, BLOCK_Q=block_q, BLOCK_G=block_g,
                         BLOCK_N=block_n, PACK=pack, CONTIG=contig, num_warps=warps, num_stages=stages)
    return fn


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="out")
    ap.add_argument("--quick", action="store_true", help="fewer candidates (a smoke run)")
    args = ap.parse_args()
    dev = torch.device("cuda")
    rng = random.Random(0)
    nano = [rng.randint(100, 1024) for _ in range(15)]  # one nano256-like 8k-token prefill step
    workloads = [("512", [512]), ("2048", [2048]), ("4096", [4096]), ("16384", [16384]), ("nano15", nano)]
    engine_cands = ["64:32:4:3", "64:64:4:2", "128:64:8:2", "128:64:8:3", "128:128:8:2", "128:64:4:2"]
    v2_cands = [(64, 64, 4, 2), (64, 64, 4, 3), (64, 128, 4, 2), (128, 64, 4, 2), (128, 64, 8, 2), (128, 64, 8, 3),
                (128, 128, 8, 2), (128, 128, 4, 2)]
    if args.quick:
        workloads, engine_cands, v2_cands = workloads[2:3], engine_cands[:2], v2_cands[:2]
    res: dict = {"us": {}, "tflops": {}, "err": {}}
    t_start = time.time()
    for shape, (hq, hkv) in HEADS.items():
        for name, lens in workloads:
            if shape == "qwen3-0.6b" and name in ("512", "16384"):
                continue
            c = case(hq, hkv, lens, dev)
            flops = 4 * D * hq * sum(n * (n + 1) / 2 for n in lens)
            reps = dict(calls=10, replays=20) if flops < 2e11 else dict(calls=4, replays=5)
            ref = torch.empty_like(c["q"])
            engine_fn(c, ref)()
            row, errs = {}, {}
            for key in engine_cands:
                os.environ["TACHYON_PREFILL_TILE"] = key
                try:
                    row[f"engine {key}"] = round(time_call(engine_fn(c, torch.empty_like(c["q"])), **reps), 2)
                except Exception as e:  # a config that cannot compile (shared memory) is reported, not fatal
                    row[f"engine {key}"] = f"failed: {type(e).__name__}"
            os.environ.pop("TACHYON_PREFILL_TILE")
            row["engine table"] = round(time_call(engine_fn(c, torch.empty_like(c["q"])), **reps), 2)
            for (m, n, w, s), pack, contig in itertools.product(v2_cands, (True, False), (False, True)):
                key = f"v2 {'pack' if pack else 'head'} {'contig' if contig else 'paged'} {m}:{n}:{w}:{s}"
                out = torch.full_like(c["q"], float("nan"))
                try:
                    fn = v2_fn(c, out, m, n, w, s, pack, contig)
                    fn()
                    torch.cuda.synchronize()
                    errs[key] = float((out.float() - ref.float()).abs().max())
                    row[key] = round(time_call(fn, **reps), 2)
                except Exception as e:
                    row[key] = f"failed: {type(e).__name__}: {str(e)[:80]}"
            label = f"{shape} T={name}"
            res["us"][label], res["err"][label] = row, errs
            ok = {k: v for k, v in row.items() if isinstance(v, float)}
            res["tflops"][label] = {k: round(flops / v / 1e6, 1) for k, v in ok.items()}
            bad = {k: e for k, e in errs.items() if not e < 0.05}
            top = sorted(ok.items(), key=lambda kv: kv[1])[:6]
            print(f"{label} ({flops / 1e12:.3f} TFLOP): engine table {row['engine table']} us "
                  f"({flops / row['engine table'] / 1e6:.0f} TFLOP/s); best: "
                  + "; ".join(f"{k} {v} ({flops / v / 1e6:.0f})" for k, v in top)
                  + (f"; WRONG: {bad}" if bad else ""), flush=True)
            out_dir = Path(args.out)
            out_dir.mkdir(parents=True, exist_ok=True)
            (out_dir / "prefill_attn_variants.json").write_text(json.dumps(res, indent=1))
    print(f"done in {time.time() - t_start:.0f} s")


if __name__ == "__main__":
    main()
