"""Decode attention straight from the qkv projection: (q/k RMSNorm,) rotary, K/V store and split-KV
attention in one kernel, so a decode step skips `qkv_post`'s launch and the q round trip.

Contract of `decode_qkv_attention(qkv, cos_sin_cache, kv_cache, slot_mapping, q_norm_weight,
k_norm_weight, eps, num_heads, num_kv_heads, head_dim, query_start_loc, seq_lens, block_tables,
max_seq_len, scale, num_kv_splits=0, decode_order=None) -> out [B, Hq, D]`:

- A decode batch: every sequence b has exactly one new token, row b of qkv (so T == B and
  query_start_loc is arange(B + 1)). Its position (rotary and causal) is seq_lens[b] - 1: the new key is
  the last of the sequence's seq_lens[b] keys.
- qkv, cos_sin_cache, the norm weights and eps as in `qkv_post` (fused_qkv.py); kv_cache, seq_lens,
  block_tables, max_seq_len, scale and num_kv_splits as in `attention` (attention.py).
- slot_mapping[b] is the cache slot of key seq_lens[b] - 1 (the block table's), where the rotated K and
  the raw V are stored, or -1: then nothing is stored and the row's output is unspecified (padding).
- Equals `qkv_post` (positions = seq_lens - 1) followed by `attention` with max_query_len 1, which is the
  reference. The kernel never reads the new key back from the cache: the program whose split holds it
  adds it from registers (rounded to the cache dtype, as a read would give it) and stores it, so no
  program races the store. Only the fp32 accumulation order differs from the two-kernel path.
- decode_order (int32 [B], a permutation of the sequences) only sets the order the programs are dispatched in
  (every KV head and split of one sequence together, in that order); the result does not depend on it.
"""

import torch

from tachyon.kernels._triton import next_pow2, pdl_args, pdl_trigger, pdl_wait, require_triton, tl, triton
from tachyon.kernels.attention import _softmax_step, attention_ref
from tachyon.kernels.attention_config import decode_config, decode_fused_early_tile, kv8_widen
from tachyon.kernels.fused_qkv import _check_args, _load_heads, _norm_rope, _norm_weights, qkv_post_ref
from tachyon.kernels.quant_fp8 import cast_to_cache, to_dot_dtype, widen_cache_tile, widened_scale
from tachyon.kernels.split_kv import _split_len, _split_output, plan_splits


def _check_decode(qkv: torch.Tensor, query_start_loc: torch.Tensor, seq_lens: torch.Tensor) -> None:
    if seq_lens.shape[0] != qkv.shape[0] or query_start_loc.shape[0] != qkv.shape[0] + 1:
        raise ValueError(f"a decode batch has one token per sequence: qkv has {qkv.shape[0]} rows, "
                         f"seq_lens {seq_lens.shape[0]}, query_start_loc {query_start_loc.shape[0]}")


def decode_qkv_attention_ref(
    qkv: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    kv_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    q_norm_weight: torch.Tensor | None,
    k_norm_weight: torch.Tensor | None,
    eps: float,
    num_heads: int,
    num_kv_heads: int,
    head_dim: int,
    query_start_loc: torch.Tensor,
    seq_lens: torch.Tensor,
    block_tables: torch.Tensor,
    max_seq_len: int,
    scale: float,
    num_kv_splits: int = 0,
    decode_order: torch.Tensor | None = None,
) -> torch.Tensor:
    """Plain torch: qkv_post_ref, then attention_ref (the two ops the kernel fuses; decode_order, which only
    orders the kernel's programs, is ignored)."""
    _check_decode(qkv, query_start_loc, seq_lens)
    positions = seq_lens.long() - 1
    q = qkv_post_ref(qkv, positions, cos_sin_cache, kv_cache, slot_mapping, q_norm_weight, k_norm_weight, eps,
                     num_heads, num_kv_heads, head_dim)
    return attention_ref(q, kv_cache, query_start_loc, seq_lens, block_tables, 1, max_seq_len, scale, None,
                         num_kv_splits)


@triton.jit
def _kv_tile(cache_ptr, blk, n0, kv_end, hk, d, dmask, stride_c_kv, stride_c_blk, stride_c_tok, stride_c_h,
             PAGE: tl.constexpr, BLOCK_N: tl.constexpr):
    """K and V [BLOCK_N, BLOCK_D] of keys n0 .. n0 + BLOCK_N (< kv_end; others 0), given their block ids
    `blk` (the block-table entries of those keys), and the key mask."""
    n = n0 + tl.arange(0, BLOCK_N)
    nmask = n < kv_end
    off = blk.to(tl.int64) * stride_c_blk + (n % PAGE) * stride_c_tok + hk * stride_c_h
    kvmask = nmask[:, None] & dmask[None, :]
    k = tl.load(cache_ptr + off[:, None] + d[None, :], mask=kvmask, other=0.0)
    v = tl.load(cache_ptr + stride_c_kv + off[:, None] + d[None, :], mask=kvmask, other=0.0)
    return k, v, nmask


@triton.jit
def _block_ids(bt_row, n0, kv_end, PAGE: tl.constexpr, BLOCK_N: tl.constexpr):
    """Block-table entries of keys n0 .. n0 + BLOCK_N (0 past kv_end)."""
    n = n0 + tl.arange(0, BLOCK_N)
    return tl.load(bt_row + n // PAGE, mask=n < kv_end, other=0)


@triton.jit
def _attend_split(row, cs_ptr, cache_ptr, slot_ptr, b, qw_ptr, kw_ptr, bt_row, hk, start, end, first, cached_end, S,
                  scale, eps, stride_cs, stride_c_kv, stride_c_blk, stride_c_tok, stride_c_h, d, dmask, k0, v0, nmask0,
                  Hq: tl.constexpr, Hkv: tl.constexpr, G: tl.constexpr, D: tl.constexpr, HALF: tl.constexpr,
                  ROT: tl.constexpr, HAS_NORM: tl.constexpr, PAGE: tl.constexpr, BLOCK_G: tl.constexpr,
                  BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr, PREC: tl.constexpr, EARLY_TILE: tl.constexpr,
                  CG: tl.constexpr, WIDEN: tl.constexpr = 0):
    """One split's attention for the token whose qkv row is `row` (KV head hk, keys start .. end of S): (q/k
    norm,) rotary, the cached keys first .. cached_end through the block-table row bt_row (with EARLY_TILE the
    tile at start is k0 / v0 / nmask0, loaded by the caller), and when the split holds key S - 1 that key from
    registers, stored to slot_ptr[b]'s slot (skipped for -1). Call after the wait for whatever wrote the row (CG:
    it was written by another program of this launch: loaded through L2). WIDEN: how an e4m3 cache's tiles are
    widened (attention._attend_tile's). Returns (o normalised, m_i, l_i)."""
    last = S - 1
    xq, xqp, hq, dq, mq = _load_heads(row + hk * G * D, G, BLOCK_G, D, BLOCK_D, HALF, ROT, CG)
    xk, xkp, hk1, dk, mk = _load_heads(row + (Hq + hk) * D, 1, 1, D, BLOCK_D, HALF, ROT, CG)
    if CG:
        v_new = tl.load(row + (Hq + Hkv + hk) * D + dk, mask=mk, other=0.0, cache_modifier=".cg")
    else:
        v_new = tl.load(row + (Hq + Hkv + hk) * D + dk, mask=mk, other=0.0)
    m_i = tl.full([BLOCK_G], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_G], tl.float32)
    acc = tl.zeros([BLOCK_G, BLOCK_D], tl.float32)
    if start < end:
        blk_next = _block_ids(bt_row, first, cached_end, PAGE, BLOCK_N)
        dd = d[None, :]
        in_rot = dd < ROT
        j = tl.where(dd < HALF, dd, dd - HALF)
        c = tl.load(cs_ptr + last * stride_cs + j, mask=in_rot, other=0.0).to(xq.dtype).to(tl.float32)
        s = tl.load(cs_ptr + last * stride_cs + HALF + j, mask=in_rot, other=0.0).to(xq.dtype).to(tl.float32)
        sign = tl.where(dd < HALF, -1.0, 1.0)
        if HAS_NORM:
            qw, qwp = _norm_weights(qw_ptr, dq, D, HALF, ROT)
            kw, kwp = _norm_weights(kw_ptr, dk, D, HALF, ROT)
        else:
            qw, qwp, kw, kwp = c, c, c, c  # unused
        q = to_dot_dtype(_norm_rope(xq, xqp, dq, qw, qwp, c, s, sign, eps, D, HALF, ROT, HAS_NORM),
                         cache_ptr.dtype.element_ty)
        kscale = widened_scale(scale, WIDEN % 3)  # the cached tiles' score scale
        if EARLY_TILE:
            if start < cached_end:  # the preloaded tile holds at least one cached key
                k0w = widen_cache_tile(k0, q.dtype, WIDEN % 3)
                sc = tl.where(nmask0[None, :], tl.dot(q, tl.trans(k0w), input_precision=PREC) * kscale, float("-inf"))
                p, alpha, m_i, l_i = _softmax_step(sc, m_i, l_i)
                v0w = widen_cache_tile(v0, q.dtype, WIDEN // 3)
                acc = acc * alpha[:, None] + tl.dot(widened_scale(p, WIDEN // 3).to(q.dtype), v0w, input_precision=PREC)
        for n0 in range(first, cached_end, BLOCK_N):
            blk = blk_next
            blk_next = _block_ids(bt_row, n0 + BLOCK_N, cached_end, PAGE, BLOCK_N)
            k, v, nmask = _kv_tile(cache_ptr, blk, n0, cached_end, hk, d, dmask,
                                   stride_c_kv, stride_c_blk, stride_c_tok, stride_c_h, PAGE, BLOCK_N)
            sc = tl.where(nmask[None, :], tl.dot(q, tl.trans(widen_cache_tile(k, q.dtype, WIDEN % 3)),
                                                 input_precision=PREC) * kscale, float("-inf"))
            p, alpha, m_i, l_i = _softmax_step(sc, m_i, l_i)
            vw = widen_cache_tile(v, q.dtype, WIDEN // 3)
            acc = acc * alpha[:, None] + tl.dot(widened_scale(p, WIDEN // 3).to(q.dtype), vw, input_precision=PREC)
        if end == S:  # this split holds the new key
            ct = cache_ptr.dtype.element_ty
            k_new = cast_to_cache(_norm_rope(xk, xkp, dk, kw, kwp, c, s, sign, eps, D, HALF, ROT, HAS_NORM), ct)
            v_st = cast_to_cache(v_new, ct)  # a new name: an e4m3 cache changes its type
            slot = tl.load(slot_ptr + b)
            if slot >= 0:
                dst = cache_ptr + slot * stride_c_tok + hk * stride_c_h + dk
                tl.store(dst, k_new, mask=mk)
                tl.store(dst + stride_c_kv, v_st, mask=mk)
            # _softmax_step for a single key, written on [BLOCK_G] vectors (a [BLOCK_G, 1] tile through the
            # shared step compiles to different, unmeasured code)
            s_new = tl.sum(q.to(tl.float32) * k_new.to(tl.float32), 1) * scale
            m_new = tl.maximum(m_i, s_new)
            alpha = tl.exp(m_i - m_new)
            p = tl.exp(s_new - m_new)
            l_i = l_i * alpha + p
            acc = acc * alpha[:, None] + p.to(q.dtype).to(tl.float32)[:, None] * v_st.to(tl.float32)
            m_i = m_new
    o = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
    return o, m_i, l_i


@triton.jit(do_not_specialize=["num_splits", "stride_bt"])
def _decode_qkv_kernel(
    qkv_ptr, cs_ptr, cache_ptr, slot_ptr, qw_ptr, kw_ptr, out_ptr, mid_o_ptr, mid_lse_ptr, cnt_ptr,
    seq_lens_ptr, bt_ptr, order_ptr, scale, eps,
    stride_qkv, stride_cs, stride_ot, stride_oh,
    stride_c_kv, stride_c_blk, stride_c_tok, stride_c_h, stride_bt,
    Hq: tl.constexpr, Hkv: tl.constexpr, G: tl.constexpr, D: tl.constexpr, HALF: tl.constexpr,
    ROT: tl.constexpr, HAS_NORM: tl.constexpr, PAGE: tl.constexpr,
    BLOCK_G: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr,
    num_splits, SPLIT: tl.constexpr, PREC: tl.constexpr, PDL: tl.constexpr, EARLY_EXIT: tl.constexpr = False,
    INLINE: tl.constexpr = False, LSE_S: tl.constexpr = 64, MERGE_S: tl.constexpr = 4,
    EARLY_TILE: tl.constexpr = False, ORDERED: tl.constexpr = False, WIDEN: tl.constexpr = 0,
):
    """Program (b, KV head hk, split sp): the G query heads of hk over the split's keys; the grid is (B, Hkv,
    splits), or when ORDERED (Hkv, splits, B) with the sequence of program index i at order_ptr[i]. Cache keys come
    through the block table (all but the last); the split holding key S - 1 takes it from qkv and stores
    it. Latency is the point at small batch, so the dependent loads are issued as early as they can be:
    the token's q / k / v rows with seq_lens (they depend on nothing), the rotary's cos / sin with the
    first tile's block ids (both depend on S only), and each tile's successor's block ids one iteration
    ahead. Outputs as _decode_kernel's: out (not SPLIT) or the partial (mid_o, mid_lse); EARLY_EXIT as
    there (an empty split returns before pdl_wait and writes nothing); INLINE as there (the last split
    program to finish merges: no merge kernel). EARLY_TILE: the split's first tile of cached keys (block ids,
    K and V) is loaded before pdl_wait, as the dedicated kernel's EARLY_TILE (cached keys were written by
    earlier steps; this step's key is never read from the cache here)."""
    pdl_trigger(PDL)
    if ORDERED:  # the order is a step input too (copied from the host): safe before pdl_wait
        hk = tl.program_id(0)
        sp = tl.program_id(1)
        b = tl.load(order_ptr + tl.program_id(2))
    else:
        b = tl.program_id(0)
        hk = tl.program_id(1)
        sp = tl.program_id(2)
    S = tl.load(seq_lens_ptr + b)  # a step input (copied from the host): safe before pdl_wait
    if EARLY_EXIT:
        if sp * _split_len(S, num_splits, BLOCK_N) >= S:
            return
    last = S - 1
    if SPLIT:
        split_len = _split_len(S, num_splits, BLOCK_N)
        start = sp * split_len
        end = tl.minimum(start + split_len, S)
    else:
        start = 0
        end = S
    g = tl.arange(0, BLOCK_G)
    d = tl.arange(0, BLOCK_D)
    gmask = g < G
    dmask = d < D
    heads = hk * G + g
    bt_row = bt_ptr + b * stride_bt
    cached_end = tl.minimum(end, last)
    first = start
    k0, v0, nmask0 = d, d, dmask  # unused unless EARLY_TILE
    if EARLY_TILE:
        blk0 = _block_ids(bt_row, start, cached_end, PAGE, BLOCK_N)
        k0, v0, nmask0 = _kv_tile(cache_ptr, blk0, start, cached_end, hk, d, dmask,
                                  stride_c_kv, stride_c_blk, stride_c_tok, stride_c_h, PAGE, BLOCK_N)
        first = start + BLOCK_N
    pdl_wait(PDL)
    row = qkv_ptr + b.to(tl.int64) * stride_qkv
    o, m_i, l_i = _attend_split(
        row, cs_ptr, cache_ptr, slot_ptr, b, qw_ptr, kw_ptr, bt_row, hk, start, end, first, cached_end, S, scale, eps,
        stride_cs, stride_c_kv, stride_c_blk, stride_c_tok, stride_c_h, d, dmask, k0, v0, nmask0,
        Hq, Hkv, G, D, HALF, ROT, HAS_NORM, PAGE, BLOCK_G, BLOCK_D, BLOCK_N, PREC, EARLY_TILE, False, WIDEN)
    omask = gmask[:, None] & dmask[None, :]
    dst_o = out_ptr + b.to(tl.int64) * stride_ot + heads[:, None] * stride_oh + d[None, :]
    if SPLIT:
        _split_output(o, m_i, l_i, dst_o, mid_o_ptr, mid_lse_ptr, cnt_ptr, b, hk, sp, S, split_len, num_splits,
                      heads, gmask, d, dmask, Hq, Hkv, D, BLOCK_G, BLOCK_D, INLINE, EARLY_EXIT, LSE_S, MERGE_S)
    else:
        tl.store(dst_o, o.to(out_ptr.dtype.element_ty), mask=omask)


def decode_qkv_attention_triton(
    qkv: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    kv_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    q_norm_weight: torch.Tensor | None,
    k_norm_weight: torch.Tensor | None,
    eps: float,
    num_heads: int,
    num_kv_heads: int,
    head_dim: int,
    query_start_loc: torch.Tensor,
    seq_lens: torch.Tensor,
    block_tables: torch.Tensor,
    max_seq_len: int,
    scale: float,
    num_kv_splits: int = 0,
    decode_order: torch.Tensor | None = None,
) -> torch.Tensor:
    """Triton: grid (B, Hkv, splits) (with decode_order: (Hkv, splits, B)), plus split_kv.py's merge kernel when
    the context is split and not merged inline."""
    require_triton()
    _check_args(qkv, cos_sin_cache, kv_cache, q_norm_weight, k_norm_weight, num_heads, num_kv_heads, head_dim)
    _check_decode(qkv, query_start_loc, seq_lens)
    assert qkv.stride(-1) == 1 and cos_sin_cache.stride(-1) == 1 and kv_cache.is_contiguous()
    has_norm = q_norm_weight is not None
    if has_norm:
        assert q_norm_weight.dtype == qkv.dtype and k_norm_weight.dtype == qkv.dtype, "norm weights: qkv dtype"
        assert q_norm_weight.is_contiguous() and k_norm_weight.is_contiguous()
    B, Hq, Hkv, D = qkv.shape[0], num_heads, num_kv_heads, head_dim
    G = Hq // Hkv
    out = torch.empty(B, Hq, D, dtype=qkv.dtype, device=qkv.device)
    if B == 0:
        return out
    plan = plan_splits(B, Hq, Hkv, D, max_seq_len, num_kv_splits, out, fused=True)
    cfg = decode_config("fp32" if qkv.dtype == torch.float32 else "bf16", plan.splits > 1, fused=True)
    pdl = pdl_args(qkv.device)
    rot = cos_sin_cache.shape[-1]
    qw = q_norm_weight if has_norm else qkv  # unused placeholders when there is no norm
    kw = k_norm_weight if has_norm else qkv
    ordered = decode_order is not None
    _decode_qkv_kernel[(Hkv, plan.splits, B) if ordered else (B, Hkv, plan.splits)](
        qkv, cos_sin_cache, kv_cache, slot_mapping, qw, kw, out, plan.mid_o, plan.mid_lse, plan.counters,
        seq_lens, block_tables, decode_order if ordered else seq_lens, scale, eps,
        qkv.stride(0), cos_sin_cache.stride(0), out.stride(0), out.stride(1),
        kv_cache.stride(0), kv_cache.stride(1), kv_cache.stride(2), kv_cache.stride(3), block_tables.stride(0),
        Hq=Hq, Hkv=Hkv, G=G, D=D, HALF=rot // 2, ROT=rot, HAS_NORM=has_norm, PAGE=kv_cache.shape[2],
        BLOCK_G=max(16, next_pow2(G)), BLOCK_D=max(16, next_pow2(D)), BLOCK_N=cfg["BLOCK_N"],
        PREC="ieee" if qkv.dtype == torch.float32 else "tf32", num_warps=cfg["num_warps"],
        num_stages=cfg["num_stages"], EARLY_TILE=decode_fused_early_tile(), **plan.kernel_args(), **pdl,
        ORDERED=ordered, WIDEN=kv8_widen(kv_cache.dtype, qkv.device, B * Hkv if plan.splits == 1 else 0),
    )
    plan.merge(out, query_start_loc, seq_lens, cfg["BLOCK_N"], pdl)
    return out
