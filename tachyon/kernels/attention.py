"""Paged attention over the flat variable-length batch (architecture.md: KV cache layout, metadata).

Contract (reference and Triton entry point alike):
  q [T, Hq, D]; kv_cache [2, num_blocks, block_size, Hkv, D] with Hq % Hkv == 0;
  query_start_loc int32 [B+1]; seq_lens int32 [B] (cached + new); block_tables int32 [B, maxblk];
  max_query_len / max_seq_len host ints; scale the softmax scale.
  Query i of sequence b sits at position seq_lens[b] - q_len[b] + i and attends to keys <= it.
  Returns out [T, Hq, D] in q's dtype (written into `out` when given). Rows past
  query_start_loc[B] are not written. Softmax in fp32. `num_kv_splits` (0 = automatic) only
  steers the Triton decode kernel's split-KV; the result does not depend on it (up to rounding).

Triton decode: one kernel; with split-KV (split_kv.py) each split writes a partial (output, log-sum-exp)
and a second kernel merges them in split order (deterministic). Merging in the last split program to
finish (one launch) is slower here at batch 1 (benchmarks/results/attn_fused_reduce_h200.json,
decode_fused_session6/inline_merge_*), so it is the fused decode kernel's default only.
"""

import torch

from tachyon.kernels._triton import next_pow2, pdl_args, pdl_trigger, pdl_wait, require_triton, sm_count, tl, triton
from tachyon.kernels.attention_config import (
    attention_pdl,
    decode_config,
    decode_early_tile,
    decode_split_align,
    kv8_widen,
    prefill_config,
)
from tachyon.kernels.attention_prefill import LOG2E, _prefill_kernel
from tachyon.kernels.quant_fp8 import to_dot_dtype, widen_cache_tile, widened_scale
from tachyon.kernels.split_kv import _split_len, _split_output, plan_splits

_REF_QUERY_ROWS = 1024  # attention_ref's query rows per score matrix
_REF_DECODE_KEYS = 1 << 16  # attention_ref's decode batches: sequences x padded keys gathered at a time


def attention_ref(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    query_start_loc: torch.Tensor,
    seq_lens: torch.Tensor,
    block_tables: torch.Tensor,
    max_query_len: int,
    max_seq_len: int,
    scale: float,
    out: torch.Tensor | None = None,
    num_kv_splits: int = 0,
    decode_order: torch.Tensor | None = None,
) -> torch.Tensor:
    """Plain torch: gather K/V through the block table, fp32 softmax (decode_order, which only orders the Triton
    decode kernel's programs, is ignored). A decode batch (max_query_len == 1) goes in
    groups of sequences padded to the group's longest context (at most `_REF_DECODE_KEYS` padded keys a group, the
    padding masked); otherwise one sequence
    at a time, queries `_REF_QUERY_ROWS` at a time, so the score matrix stays [heads, 1024, keys] however long the
    step's prompt chunk."""
    T, Hq, D = q.shape
    block_size, Hkv = kv_cache.shape[2], kv_cache.shape[3]
    G = Hq // Hkv
    if out is None:
        out = torch.empty_like(q)
    starts = query_start_loc.tolist()
    lens = seq_lens.tolist()
    if max_query_len == 1:
        _decode_ref(q, kv_cache, starts, lens, block_tables, scale, out)
        return out
    for b, S in enumerate(lens):
        s, e = starts[b], starts[b + 1]
        L = e - s
        if L == 0:
            continue
        nblk = -(-S // block_size)
        blocks = block_tables[b, :nblk].long()
        k = kv_cache[0, blocks].reshape(nblk * block_size, Hkv, D)[:S]
        v = kv_cache[1, blocks].reshape(nblk * block_size, Hkv, D)[:S]
        kb = k.float().permute(1, 0, 2).unsqueeze(1)  # [Hkv, 1, S, D]
        vb = v.float().permute(1, 0, 2).unsqueeze(1)
        kpos = torch.arange(S, device=q.device).unsqueeze(0)
        for r0 in range(0, L, _REF_QUERY_ROWS):
            r1 = min(r0 + _REF_QUERY_ROWS, L)
            qb = q[s + r0:s + r1].float().reshape(r1 - r0, Hkv, G, D).permute(1, 2, 0, 3)  # [Hkv, G, rows, D]
            scores = torch.matmul(qb, kb.transpose(-1, -2)) * scale  # [Hkv, G, rows, S]
            if L > 1:
                qpos = torch.arange(S - L + r0, S - L + r1, device=q.device).unsqueeze(1)
                scores.masked_fill_(kpos > qpos, float("-inf"))
            probs = torch.softmax(scores, dim=-1)
            o = torch.matmul(probs, vb)  # [Hkv, G, rows, D]
            out[s + r0:s + r1] = o.permute(2, 0, 1, 3).reshape(r1 - r0, Hq, D).to(out.dtype)
    return out


def _decode_ref(q: torch.Tensor, kv_cache: torch.Tensor, starts: list[int], lens: list[int],
                block_tables: torch.Tensor, scale: float, out: torch.Tensor) -> None:
    """attention_ref for queries of one token each (a sequence with no query row is skipped). A group's padding
    keys gather the sequence's own first key, so they are finite whatever the cache holds elsewhere; their scores
    are masked, so they weigh exactly 0."""
    T, Hq, D = q.shape
    block_size, Hkv = kv_cache.shape[2], kv_cache.shape[3]
    G = Hq // Hkv
    k_rows, v_rows = kv_cache[0].reshape(-1, D), kv_cache[1].reshape(-1, D)  # row (slot * Hkv + head)
    heads = torch.arange(Hkv, device=q.device)[None, :, None]
    seqs = [b for b in range(len(lens)) if starts[b + 1] > starts[b]]
    if len(seqs) == len(lens) == T and len(lens) * max(lens) <= _REF_DECODE_KEYS:  # the usual step: one group
        groups = [(seqs, max(lens), block_tables, None)]
    else:
        groups = []
        i = 0
        while i < len(seqs):
            j, longest = i + 1, lens[seqs[i]]
            while j < len(seqs) and (j - i + 1) * max(longest, lens[seqs[j]]) <= _REF_DECODE_KEYS:
                longest = max(longest, lens[seqs[j]])
                j += 1
            group = seqs[i:j]
            groups.append((group, longest, block_tables[torch.tensor(group, device=q.device)],
                           torch.tensor([starts[b] for b in group], device=q.device)))
            i = j
    for group, longest, tables, q_rows in groups:
        g = len(group)
        seq_len = torch.tensor([lens[b] for b in group], device=q.device)
        pos = torch.arange(longest, device=q.device)
        valid = pos[None, :] < seq_len[:, None]  # [g, S]
        pos = torch.where(valid, pos, 0)
        blocks = tables.long().gather(1, pos // block_size)
        rows = ((blocks * block_size + pos % block_size)[:, None, :] * Hkv + heads).reshape(-1)
        k = k_rows.index_select(0, rows).view(g, Hkv, longest, D).float()
        v = v_rows.index_select(0, rows).view(g, Hkv, longest, D).float()
        qg = (q if q_rows is None else q[q_rows]).float().reshape(g, Hkv, G, D)
        scores = torch.matmul(qg, k.transpose(-1, -2)) * scale  # [g, Hkv, G, S]
        scores.masked_fill_(~valid[:, None, None, :], float("-inf"))
        o = torch.matmul(torch.softmax(scores, dim=-1), v).reshape(g, Hq, D).to(out.dtype)  # [g, Hkv, G, D]
        if q_rows is None:
            out.copy_(o)
        else:
            out[q_rows] = o


# ----------------------------------------------------------------------------------------------
# Triton


@triton.jit
def _softmax_step(s, m_i, l_i):
    """One online-softmax step over a tile of scores s [rows, keys] (masked keys -inf): returns (p, alpha,
    m_new, l_new) with p = exp(s - m_new) and alpha = exp(m_i - m_new), the factor that rescales the
    accumulated output before p @ V is added (the caller does that: where it loads V is its business)."""
    m_new = tl.maximum(m_i, tl.max(s, 1))
    p = tl.exp(s - m_new[:, None])
    alpha = tl.exp(m_i - m_new)
    return p, alpha, m_new, l_i * alpha + tl.sum(p, 1)


@triton.jit
def _attend_tile(
    acc, m_i, l_i, q, cache_ptr, bt_ptr, n0, kv_end, pos, hk, d, dmask, scale,
    stride_c_kv, stride_c_blk, stride_c_tok, stride_c_h,
    PAGE: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, PREC: tl.constexpr, WIDEN: tl.constexpr = 0,
):
    """Online-softmax update of (acc, m_i, l_i) with keys n0 .. n0 + BLOCK_N (< kv_end) gathered
    through the block table row at bt_ptr; CAUSAL also masks keys after each query's position. WIDEN: how an
    e4m3 cache's tiles are widened (quant_fp8.widen_cache_tile; 1 and 2 hold values / 256, made up here)."""
    n = n0 + tl.arange(0, BLOCK_N)
    nmask = n < kv_end
    blk = tl.load(bt_ptr + n // PAGE, mask=nmask, other=0).to(tl.int64)
    off = blk * stride_c_blk + (n % PAGE) * stride_c_tok + hk * stride_c_h
    kvmask = nmask[:, None] & dmask[None, :]
    k = widen_cache_tile(tl.load(cache_ptr + off[:, None] + d[None, :], mask=kvmask, other=0.0), q.dtype, WIDEN % 3)
    s = tl.dot(q, tl.trans(k), input_precision=PREC) * widened_scale(scale, WIDEN % 3)
    if CAUSAL:
        s = tl.where((n[None, :] <= pos[:, None]) & nmask[None, :], s, float("-inf"))
    else:
        s = tl.where(nmask[None, :], s, float("-inf"))
    p, alpha, m_new, l_i = _softmax_step(s, m_i, l_i)
    v = widen_cache_tile(tl.load(cache_ptr + stride_c_kv + off[:, None] + d[None, :], mask=kvmask, other=0.0),
                         q.dtype, WIDEN // 3)
    acc = acc * alpha[:, None] + tl.dot(widened_scale(p, WIDEN // 3).to(v.dtype), v, input_precision=PREC)
    return acc, m_new, l_i


@triton.jit
def _decode_split(
    q_ptr, cache_ptr, bt_row, scale, tok, hk, start, end, g, heads, gmask, d, dmask,
    stride_qt, stride_qh, stride_c_kv, stride_c_blk, stride_c_tok, stride_c_h,
    PAGE: tl.constexpr, BLOCK_G: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr,
    PREC: tl.constexpr, WIDEN: tl.constexpr = 0,
):
    """Attention of one token's query heads `heads` (KV head hk) over keys start .. end: returns the
    normalised output [BLOCK_G, BLOCK_D] and the softmax running max and sum (fp32). WIDEN as _attend_tile's."""
    q = tl.load(
        q_ptr + tok * stride_qt + heads[:, None] * stride_qh + d[None, :],
        mask=gmask[:, None] & dmask[None, :], other=0.0,
    )
    q = to_dot_dtype(q, cache_ptr.dtype.element_ty)
    m_i = tl.full([BLOCK_G], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_G], tl.float32)
    acc = tl.zeros([BLOCK_G, BLOCK_D], tl.float32)
    for n0 in range(start, end, BLOCK_N):
        acc, m_i, l_i = _attend_tile(
            acc, m_i, l_i, q, cache_ptr, bt_row, n0, end, g, hk, d, dmask, scale,
            stride_c_kv, stride_c_blk, stride_c_tok, stride_c_h, PAGE, BLOCK_N, False, PREC, WIDEN,
        )
    o = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
    return o, m_i, l_i


# stride_bt (the block-table width of an eager step) changes from step to step: specialising on its
# divisibility would compile a second variant mid-serving (a 6 s stall seen in a 7B nano256 run)
@triton.jit(do_not_specialize=["num_splits", "stride_bt"])
def _decode_kernel(
    q_ptr, cache_ptr, out_ptr, mid_o_ptr, mid_lse_ptr, cnt_ptr,
    qsl_ptr, seq_lens_ptr, bt_ptr, order_ptr, scale,
    stride_qt, stride_qh, stride_ot, stride_oh,
    stride_c_kv, stride_c_blk, stride_c_tok, stride_c_h, stride_bt,
    Hq: tl.constexpr, G: tl.constexpr, D: tl.constexpr, PAGE: tl.constexpr,
    BLOCK_G: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr,
    num_splits, SPLIT: tl.constexpr, PREC: tl.constexpr, PDL: tl.constexpr, EARLY_EXIT: tl.constexpr = False,
    INLINE: tl.constexpr = False, LSE_S: tl.constexpr = 64, MERGE_S: tl.constexpr = 4,
    EARLY_TILE: tl.constexpr = False, SPLIT_ALIGN: tl.constexpr = 0, ORDERED: tl.constexpr = False,
    WIDEN: tl.constexpr = 0,
):
    """One program = (sequence, KV head, split): the G query heads of that KV head form one tile. The grid is
    (B, Hkv, splits), or when ORDERED (Hkv, splits, B) with the sequence of program index i at order_ptr[i]: every
    program of one sequence is dispatched together, in that order (a longest-first order leaves the shortest
    sequences for the launch's last wave), as the fused kernel's.

    not SPLIT: the whole context, written to out. Otherwise each sequence cuts its own context
    into splits of split_len keys (a multiple of BLOCK_N), so only its first few programs have keys;
    every program writes its partial (mid_o, mid_lse; empty splits o = 0, lse = -inf) and
    _split_reduce_kernel merges all num_splits afterwards. num_splits is a run-time argument (not
    specialised): every batch bucket's graph shares one compiled kernel. EARLY_EXIT (SPLIT only): a
    program whose split is empty returns before pdl_wait, writing nothing (seq_lens is a step input no
    kernel writes, so it may be read first), and the merge reads only the splits that hold keys.
    EARLY_TILE (SPLIT only): the split's first key tile, but for the step's own key S - 1, is loaded before
    pdl_wait (decode_early_tile). SPLIT_ALIGN (> 0): split lengths are multiples of it instead of BLOCK_N (a
    split may then end inside a tile, whose keys past the split are masked; decode_split_align). WIDEN: how an e4m3
    cache's tiles are widened (_attend_tile's; attention_config.kv8_widen)."""
    ALIGN: tl.constexpr = SPLIT_ALIGN if SPLIT_ALIGN > 0 else BLOCK_N
    pdl_trigger(PDL)
    if ORDERED:
        hk = tl.program_id(0)
        sp = tl.program_id(1)
        b = tl.load(order_ptr + tl.program_id(2))
    else:
        b = tl.program_id(0)
        hk = tl.program_id(1)
        sp = tl.program_id(2)
    # step inputs (seq_lens, query_start_loc, block tables, the order: copied from the host, no kernel writes
    # them) are read before pdl_wait
    S = tl.load(seq_lens_ptr + b)
    if EARLY_EXIT:
        if sp * _split_len(S, num_splits, ALIGN) >= S:
            return
    tok = tl.load(qsl_ptr + b).to(tl.int64)
    g = tl.arange(0, BLOCK_G)
    d = tl.arange(0, BLOCK_D)
    gmask = g < G
    dmask = d < D
    heads = hk * G + g
    omask = gmask[:, None] & dmask[None, :]
    bt_row = bt_ptr + b * stride_bt
    dst = out_ptr + tok * stride_ot + heads[:, None] * stride_oh + d[None, :]
    if not SPLIT:
        pdl_wait(PDL)
        o, m_i, l_i = _decode_split(
            q_ptr, cache_ptr, bt_row, scale, tok, hk, 0, S, g, heads, gmask, d, dmask,
            stride_qt, stride_qh, stride_c_kv, stride_c_blk, stride_c_tok, stride_c_h,
            PAGE, BLOCK_G, BLOCK_D, BLOCK_N, PREC, WIDEN,
        )
        tl.store(dst, o.to(out_ptr.dtype.element_ty), mask=omask)
    else:
        # this sequence's own split length: every split of a long context works
        split_len = _split_len(S, num_splits, ALIGN)
        start = sp * split_len
        end = tl.minimum(start + split_len, S)
        if EARLY_TILE:
            # the split's first tile is loaded before pdl_wait too, all but key S - 1 (this step's, stored by
            # the kernel before; cached keys were written by earlier steps), which is read after the wait
            n = start + tl.arange(0, BLOCK_N)
            blk = tl.load(bt_row + n // PAGE, mask=n < end, other=0).to(tl.int64)
            off = (blk * stride_c_blk + (n % PAGE) * stride_c_tok + hk * stride_c_h)[:, None] + d[None, :]
            cached = (n < tl.minimum(end, S - 1))[:, None] & dmask[None, :]
            k = tl.load(cache_ptr + off, mask=cached, other=0.0)
            v = tl.load(cache_ptr + stride_c_kv + off, mask=cached, other=0.0)
            pdl_wait(PDL)
            new = (n == S - 1)[:, None] & dmask[None, :]
            k = tl.where(new, tl.load(cache_ptr + off, mask=new, other=0.0), k)
            v = tl.where(new, tl.load(cache_ptr + stride_c_kv + off, mask=new, other=0.0), v)
            q = tl.load(q_ptr + tok * stride_qt + heads[:, None] * stride_qh + d[None, :], mask=omask, other=0.0)
            q = to_dot_dtype(q, cache_ptr.dtype.element_ty)
            k, v = widen_cache_tile(k, q.dtype, WIDEN % 3), widen_cache_tile(v, q.dtype, WIDEN // 3)
            m_i = tl.full([BLOCK_G], float("-inf"), tl.float32)
            l_i = tl.zeros([BLOCK_G], tl.float32)
            acc = tl.zeros([BLOCK_G, BLOCK_D], tl.float32)
            if start < end:  # an empty split (EARLY_EXIT off) keeps o = 0, l_i = 0
                sc = tl.dot(q, tl.trans(k), input_precision=PREC) * widened_scale(scale, WIDEN % 3)
                sc = tl.where((n < end)[None, :], sc, float("-inf"))
                p, alpha, m_i, l_i = _softmax_step(sc, m_i, l_i)
                acc = tl.dot(widened_scale(p, WIDEN // 3).to(v.dtype), v, input_precision=PREC)
            for n0 in range(start + BLOCK_N, end, BLOCK_N):
                acc, m_i, l_i = _attend_tile(
                    acc, m_i, l_i, q, cache_ptr, bt_row, n0, end, g, hk, d, dmask, scale,
                    stride_c_kv, stride_c_blk, stride_c_tok, stride_c_h, PAGE, BLOCK_N, False, PREC, WIDEN,
                )
            o = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
        else:
            pdl_wait(PDL)
            o, m_i, l_i = _decode_split(
                q_ptr, cache_ptr, bt_row, scale, tok, hk, start, end, g, heads, gmask, d, dmask,
                stride_qt, stride_qh, stride_c_kv, stride_c_blk, stride_c_tok, stride_c_h,
                PAGE, BLOCK_G, BLOCK_D, BLOCK_N, PREC, WIDEN,
            )
        _split_output(o, m_i, l_i, dst, mid_o_ptr, mid_lse_ptr, cnt_ptr, b, hk, sp, S, split_len, num_splits,
                      heads, gmask, d, dmask, Hq, Hq // G, D, BLOCK_G, BLOCK_D, INLINE, EARLY_EXIT, LSE_S,
                      MERGE_S)


def attention_triton(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    query_start_loc: torch.Tensor,
    seq_lens: torch.Tensor,
    block_tables: torch.Tensor,
    max_query_len: int,
    max_seq_len: int,
    scale: float,
    out: torch.Tensor | None = None,
    num_kv_splits: int = 0,
    decode_order: torch.Tensor | None = None,
) -> torch.Tensor:
    """Triton: decode kernel (+ split reduce kernel) when max_query_len == 1, else the prefill/extend
    kernel. decode_order (int32 [B], a permutation of the sequences; decode only): the order the decode programs
    are dispatched in, each sequence's programs together; the result does not depend on it."""
    require_triton()
    T, Hq, D = q.shape
    Hkv, page = kv_cache.shape[3], kv_cache.shape[2]
    assert Hq % Hkv == 0 and q.stride(-1) == 1 and kv_cache.is_contiguous()
    G = Hq // Hkv
    B = seq_lens.shape[0]
    if out is None:
        out = torch.empty_like(q)
    if B == 0 or T == 0:
        return out
    prec = "ieee" if q.dtype == torch.float32 else "tf32"
    BLOCK_D = max(16, next_pow2(D))
    cache_strides = (kv_cache.stride(0), kv_cache.stride(1), kv_cache.stride(2), kv_cache.stride(3))
    cfg_key = "fp32" if q.dtype == torch.float32 else "bf16"
    if max_query_len == 1:
        plan = plan_splits(B, Hq, Hkv, D, max_seq_len, num_kv_splits, out, fused=False)
        pdl = pdl_args(q.device, attention_pdl(B * Hkv if plan.splits == 1 else None, sm_count(q.device)))
        cfg = decode_config(cfg_key, plan.splits > 1)
        align = decode_split_align(cfg["BLOCK_N"])
        ordered = decode_order is not None
        _decode_kernel[(Hkv, plan.splits, B) if ordered else (B, Hkv, plan.splits)](
            q, kv_cache, out, plan.mid_o, plan.mid_lse, plan.counters, query_start_loc, seq_lens, block_tables,
            decode_order if ordered else seq_lens, scale,
            q.stride(0), q.stride(1), out.stride(0), out.stride(1), *cache_strides, block_tables.stride(0),
            Hq=Hq, G=G, D=D, PAGE=page, BLOCK_G=max(16, next_pow2(G)), BLOCK_D=BLOCK_D, BLOCK_N=cfg["BLOCK_N"],
            PREC=prec, num_warps=cfg["num_warps"], num_stages=cfg["num_stages"], **plan.kernel_args(), **pdl,
            EARLY_TILE=plan.splits > 1 and decode_early_tile(q.dtype), SPLIT_ALIGN=align, ORDERED=ordered,
            WIDEN=kv8_widen(kv_cache.dtype, q.device, B * Hkv if plan.splits == 1 else 0),
        )
        plan.merge(out, query_start_loc, seq_lens, align, pdl)
        return out
    BLOCK_G = next_pow2(G)
    cfg = prefill_config(cfg_key, max_query_len, BLOCK_G)
    BLOCK_Q = max(1, cfg["BLOCK_M"] // BLOCK_G, 16 // BLOCK_G)
    grid = (triton.cdiv(max_query_len, BLOCK_Q), B, Hkv)
    _prefill_kernel[grid](
        q, kv_cache, out, query_start_loc, seq_lens, block_tables, scale * LOG2E,
        q.stride(0), q.stride(1), out.stride(0), out.stride(1), *cache_strides, block_tables.stride(0),
        G=G, D=D, PAGE=page, BLOCK_Q=BLOCK_Q, BLOCK_G=BLOCK_G, BLOCK_N=cfg["BLOCK_N"], BLOCK_D=BLOCK_D,
        PREC=prec, num_warps=cfg["num_warps"], num_stages=cfg["num_stages"], **pdl_args(q.device),
    )
    return out
