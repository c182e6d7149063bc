"""The prefill/extend attention kernel (attention.py's contract, queries of any length over the paged cache): one
program per (block of query tokens, sequence, KV head), causal over the cached prefix and the new keys, softmax in
base 2. `_prefill_block` is one such program's work, shared with the mixed-step kernel (attention_mixed.py).
The plain-torch reference is attention.py's attention_ref.
"""

from tachyon.kernels._triton import pdl_trigger, pdl_wait, tl, triton
from tachyon.kernels.quant_fp8 import to_dot_dtype

LOG2E = 1.4426950408889634  # the prefill kernel works in base 2: exp(x) = exp2(x * LOG2E)


@triton.jit
def _prefill_tile(
    acc, m_i, l_i, q, cache_ptr, bt_ptr, n0, kv_end, pos, hk, d, dmask, scale_log2,
    stride_c_kv, stride_c_blk, stride_c_tok, stride_c_h,
    PAGE: tl.constexpr, BLOCK_N: tl.constexpr, MASK: tl.constexpr, EVEN_D: tl.constexpr, PREC: tl.constexpr,
):
    """_attend_tile for the prefill kernel, in base 2 (scale_log2 = scale * log2(e), exp2: the softmax is the
    same). MASK=False may be passed only for a tile every row may see in full (n0 + BLOCK_N <= each row's
    position + 1 and <= kv_end): its loads and scores then go unmasked (the block-table entries exist)."""
    n = n0 + tl.arange(0, BLOCK_N)
    if MASK:
        nmask = n < kv_end
        blk = tl.load(bt_ptr + n // PAGE, mask=nmask, other=0).to(tl.int64)
        kvmask = nmask[:, None] & dmask[None, :]
    else:
        blk = tl.load(bt_ptr + n // PAGE).to(tl.int64)
        kvmask = dmask[None, :]
    off = blk * stride_c_blk + (n % PAGE) * stride_c_tok + hk * stride_c_h
    if MASK or not EVEN_D:
        k = tl.load(cache_ptr + off[:, None] + d[None, :], mask=kvmask, other=0.0).to(q.dtype)
    else:
        k = tl.load(cache_ptr + off[:, None] + d[None, :]).to(q.dtype)  # an e4m3 cache: exact
    s = tl.dot(q, tl.trans(k), input_precision=PREC) * scale_log2
    if MASK:
        s = tl.where((n[None, :] <= pos[:, None]) & nmask[None, :], s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    p = tl.math.exp2(s - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, 1)
    if MASK or not EVEN_D:
        v = tl.load(cache_ptr + stride_c_kv + off[:, None] + d[None, :], mask=kvmask, other=0.0).to(q.dtype)
    else:
        v = tl.load(cache_ptr + stride_c_kv + off[:, None] + d[None, :]).to(q.dtype)
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PREC)
    return acc, m_new, l_i


@triton.jit
def _prefill_block(
    q_ptr, cache_ptr, out_ptr, q_start, q_len, S, bt_row, qb, hk, scale_log2,
    stride_qt, stride_qh, stride_ot, stride_oh, stride_c_kv, stride_c_blk, stride_c_tok, stride_c_h,
    G: tl.constexpr, D: tl.constexpr, PAGE: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_G: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, PREC: tl.constexpr,
):
    """Query block qb (BLOCK_Q tokens from row q_start + qb * BLOCK_Q, fewer at the end) of a sequence of q_len new
    tokens whose keys end at S, KV head hk: its M tile packs those tokens' G query heads (row r: token r // BLOCK_G,
    head r % BLOCK_G), so each K/V tile is read once per KV head. Causal over the cached prefix + new keys; tiles
    below the block's causal diagonal run unmasked (_prefill_tile). The caller has waited for its predecessor and
    calls this only for a block that holds tokens (qb * BLOCK_Q < q_len)."""
    ctx = S - q_len
    r = tl.arange(0, BLOCK_Q * BLOCK_G)
    i = qb * BLOCK_Q + r // BLOCK_G
    g = r % BLOCK_G
    d = tl.arange(0, BLOCK_D)
    rmask = (i < q_len) & (g < G)
    dmask = d < D
    rows = (q_start + i).to(tl.int64)
    heads = hk * G + g
    io_mask = rmask[:, None] & dmask[None, :]
    q = tl.load(q_ptr + rows[:, None] * stride_qt + heads[:, None] * stride_qh + d[None, :], mask=io_mask, other=0.0)
    q = to_dot_dtype(q, cache_ptr.dtype.element_ty)
    pos = ctx + i
    kv_end = tl.minimum(S, ctx + (qb + 1) * BLOCK_Q)
    m_i = tl.full([BLOCK_Q * BLOCK_G], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_Q * BLOCK_G], tl.float32)
    acc = tl.zeros([BLOCK_Q * BLOCK_G, BLOCK_D], tl.float32)
    # keys up to the block's first query position are visible to all its rows: no causal mask
    full_end = tl.minimum((ctx + qb * BLOCK_Q + 1) // BLOCK_N * BLOCK_N, kv_end)
    for n0 in range(0, full_end, BLOCK_N):
        acc, m_i, l_i = _prefill_tile(
            acc, m_i, l_i, q, cache_ptr, bt_row, n0, kv_end, pos, hk, d, dmask, scale_log2,
            stride_c_kv, stride_c_blk, stride_c_tok, stride_c_h, PAGE, BLOCK_N, False, D == BLOCK_D, PREC,
        )
    for n0 in range(full_end, kv_end, BLOCK_N):
        acc, m_i, l_i = _prefill_tile(
            acc, m_i, l_i, q, cache_ptr, bt_row, n0, kv_end, pos, hk, d, dmask, scale_log2,
            stride_c_kv, stride_c_blk, stride_c_tok, stride_c_h, PAGE, BLOCK_N, True, D == BLOCK_D, PREC,
        )
    o = acc / l_i[:, None]
    dst = out_ptr + rows[:, None] * stride_ot + heads[:, None] * stride_oh + d[None, :]
    tl.store(dst, o.to(out_ptr.dtype.element_ty), mask=io_mask)


@triton.jit(do_not_specialize=["stride_bt"])  # varies per eager step (see _decode_kernel)
def _prefill_kernel(
    q_ptr, cache_ptr, out_ptr, qsl_ptr, seq_lens_ptr, bt_ptr, scale_log2,
    stride_qt, stride_qh, stride_ot, stride_oh,
    stride_c_kv, stride_c_blk, stride_c_tok, stride_c_h, stride_bt,
    G: tl.constexpr, D: tl.constexpr, PAGE: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_G: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, PREC: tl.constexpr, PDL: tl.constexpr,
):
    """One program = (block of BLOCK_Q query tokens, sequence, KV head): _prefill_block. Decode rows of a mixed
    batch cost one program per KV head. scale_log2 is the softmax scale times log2(e)."""
    pdl_trigger(PDL)
    pdl_wait(PDL)
    qb = tl.num_programs(0) - 1 - tl.program_id(0)  # heaviest (last) query blocks first
    b = tl.program_id(1)
    hk = tl.program_id(2)
    q_start = tl.load(qsl_ptr + b)
    q_len = tl.load(qsl_ptr + b + 1) - q_start
    if qb * BLOCK_Q < q_len:
        _prefill_block(
            q_ptr, cache_ptr, out_ptr, q_start, q_len, tl.load(seq_lens_ptr + b), bt_ptr + b * stride_bt, qb, hk,
            scale_log2, stride_qt, stride_qh, stride_ot, stride_oh, stride_c_kv, stride_c_blk, stride_c_tok,
            stride_c_h, G, D, PAGE, BLOCK_Q, BLOCK_G, BLOCK_N, BLOCK_D, PREC,
        )
