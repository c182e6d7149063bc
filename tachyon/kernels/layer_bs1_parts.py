"""Device-side building blocks of the batch-1 layer kernel (layer_bs1.py) and the model kernel (model_bs1.py):
weight row blocks, vector loads through L2, the grid barrier and phase entries, and one attention work item.
Each is a `triton.jit` function inlined into its caller; the contracts are layer_bs1.py's.
"""

from __future__ import annotations

from tachyon.kernels._triton import pdl_wait, tl, triton
from tachyon.kernels.decode_fused import _attend_split, _block_ids, _kv_tile
from tachyon.kernels.split_kv import _split_len, _split_output


@triton.jit
def _row_block(w_ptr, r0, R: tl.constexpr, N: tl.constexpr, K: tl.constexpr, BLOCK_R: tl.constexpr,
               BLOCK_K: tl.constexpr):
    """Rows r0 .. r0 + R (those below N; others 0) of a row-major [N, K] weight, whole K: [BLOCK_R, BLOCK_K]."""
    i = tl.arange(0, BLOCK_R)
    r = r0 + i
    rmask = (i < R) & (r < N)
    k = tl.arange(0, BLOCK_K)
    ptrs = w_ptr + r.to(tl.int64)[:, None] * K + k[None, :]
    if K == BLOCK_K:
        w = tl.load(ptrs, mask=rmask[:, None], other=0.0)
    else:
        w = tl.load(ptrs, mask=rmask[:, None] & (k < K)[None, :], other=0.0)
    return w, r, rmask


@triton.jit
def _vector(ptr, N: tl.constexpr, BLOCK: tl.constexpr, CG: tl.constexpr):
    """ptr[0 .. N] as a [BLOCK] vector (0 past N); CG: through L2 (written by another program of this launch)."""
    k = tl.arange(0, BLOCK)
    if CG:
        return tl.load(ptr + k, mask=k < N, other=0.0, cache_modifier=".cg")
    else:
        return tl.load(ptr + k, mask=k < N, other=0.0)


@triton.jit
def _grid_sync(bar_ptr, NPROG: tl.constexpr):
    """Every program of the launch waits here until all NPROG have arrived; what each stored before is visible to
    all after. bar_ptr[0] counts arrivals (0 between barriers), bar_ptr[1] is the generation the last arrival bumps
    (a sense-reversing barrier: it leaves the counter zeroed, so any launch may use it next). One thread per
    program does the atomics (Triton's scalar atomics), the CTA barriers around them order the other threads. The
    waiters poll the generation with acquire loads: Triton 3.6 lowers an atomic add of 0 to `ld.acquire.gpu`, so
    the polls do not queue read-modify-writes at the L2 slice the last arrival needs (checked in the PTX; a volatile
    load poll followed by an unused acquire add lost the acquire to dead-code elimination)."""
    tl.debug_barrier()  # every thread's stores are issued before the program counts itself in
    gen = tl.atomic_add(bar_ptr + 1, 0, sem="relaxed", scope="gpu")
    if tl.atomic_add(bar_ptr, 1, sem="acq_rel", scope="gpu") == NPROG - 1:
        tl.atomic_xchg(bar_ptr, 0, sem="relaxed", scope="gpu")
        tl.atomic_add(bar_ptr + 1, 1, sem="release", scope="gpu")
    else:
        cur = tl.atomic_add(bar_ptr + 1, 0, sem="acquire", scope="gpu")
        while cur == gen:
            cur = tl.atomic_add(bar_ptr + 1, 0, sem="acquire", scope="gpu")
    tl.debug_barrier()


@triton.jit
def _enter(k: tl.constexpr, FIRST: tl.constexpr, bar_ptr, NPROG: tl.constexpr, PDL: tl.constexpr):
    """The start of phase k: the previous kernel's end (the launch's first phase) or the grid barrier."""
    if k == FIRST:
        pdl_wait(PDL)
    else:
        _grid_sync(bar_ptr, NPROG)


@triton.jit
def _attend(item, qkv_ptr, cs_ptr, cache_ptr, slot_ptr, qw_ptr, kw_ptr, attn_ptr, mid_o_ptr, mid_lse_ptr, cnt_ptr,
            S, bt_ptr, scale, eps, num_splits, stride_cs, stride_c_kv, stride_c_blk, stride_c_tok, stride_c_h,
            Hq: tl.constexpr, Hkv: tl.constexpr, G: tl.constexpr, D: tl.constexpr, HALF: tl.constexpr,
            ROT: tl.constexpr, HAS_NORM: tl.constexpr, PAGE: tl.constexpr, BLOCK_G: tl.constexpr,
            BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr, PREC: tl.constexpr, LSE_S: tl.constexpr,
            MERGE_S: tl.constexpr, k0, v0, nmask0, EARLY_TILE: tl.constexpr):
    """Work item (KV head hk, split sp) of the single sequence: decode_fused.py's split program (its
    `_attend_split`, the qkv row read through L2), empty splits skipped, the splits merged inline into attn
    [Hq, D] by the last to finish. EARLY_TILE: the split's first tile of cached keys is k0 / v0 / nmask0
    (`_first_tile`, loaded by the caller before it waited)."""
    hk = item // num_splits
    sp = item % num_splits
    split_len = _split_len(S, num_splits, BLOCK_N)
    start = sp * split_len
    end = tl.minimum(start + split_len, S)
    if start < end:
        g = tl.arange(0, BLOCK_G)
        d = tl.arange(0, BLOCK_D)
        gmask = g < G
        dmask = d < D
        heads = hk * G + g
        if EARLY_TILE:
            first = start + BLOCK_N
        else:
            first = start
        o, m_i, l_i = _attend_split(
            qkv_ptr, cs_ptr, cache_ptr, slot_ptr, 0, qw_ptr, kw_ptr, bt_ptr, hk, start, end, first,
            tl.minimum(end, S - 1), S, scale, eps, stride_cs, stride_c_kv, stride_c_blk, stride_c_tok, stride_c_h,
            d, dmask, k0, v0, nmask0, Hq, Hkv, G, D, HALF, ROT, HAS_NORM, PAGE, BLOCK_G, BLOCK_D, BLOCK_N, PREC,
            EARLY_TILE, True)
        dst_o = attn_ptr + heads[:, None] * D + d[None, :]
        _split_output(o, m_i, l_i, dst_o, mid_o_ptr, mid_lse_ptr, cnt_ptr, 0, hk, sp, S, split_len, num_splits,
                      heads, gmask, d, dmask, Hq, Hkv, D, BLOCK_G, BLOCK_D, True, True, LSE_S, MERGE_S)


@triton.jit
def _first_tile(pid, seq_lens_ptr, bt_ptr, cache_ptr, num_splits, stride_c_kv, stride_c_blk, stride_c_tok,
                stride_c_h, Hkv: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr,
                PAGE: tl.constexpr):
    """The first tile of cached keys (K, V, key mask) of work item pid, when each program has at most one: step
    inputs and keys of earlier steps only, so it may be loaded before any wait. Empty for a program without an
    item or a split without cached keys (masked loads: no traffic)."""
    S = tl.load(seq_lens_ptr)
    hk = pid // num_splits
    split_len = _split_len(S, num_splits, BLOCK_N)
    start = (pid % num_splits) * split_len
    cached_end = tl.minimum(tl.minimum(start + split_len, S), S - 1)
    cached_end = tl.where(pid < Hkv * num_splits, cached_end, start)
    d = tl.arange(0, BLOCK_D)
    blk = _block_ids(bt_ptr, start, cached_end, PAGE, BLOCK_N)
    return _kv_tile(cache_ptr, blk, start, cached_end, tl.minimum(hk, Hkv - 1), d, d < D, stride_c_kv, stride_c_blk,
                    stride_c_tok, stride_c_h, PAGE, BLOCK_N)


@triton.jit
def _enter_layer(first_layer, bar_ptr, NPROG: tl.constexpr, PDL: tl.constexpr, IN_LOOP: tl.constexpr):
    """The start of a layer's first phase: the previous kernel's end, or in the model kernel (IN_LOOP) the grid
    barrier after the previous layer (the previous kernel's end for the first layer)."""
    if IN_LOOP:
        if first_layer:
            pdl_wait(PDL)
        else:
            _grid_sync(bar_ptr, NPROG)
    else:
        pdl_wait(PDL)
