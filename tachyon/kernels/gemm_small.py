"""Skinny GEMMs for decode batches of 2..SMALL_M rows, where cuBLAS picks small-tile kernels that leave memory
bandwidth unused: each weight tile is read once for all rows with tensor-core dots (see SMALL_CONFIGS); the
optional split-K writes fp32 partials summed in a fixed order (deterministic). With FP8 operands and scales
the same kernels serve quant_fp8.py's W8A8 path. Which config (if any) a weight uses is decided at warm-up
by gemv_select.py.
"""

from __future__ import annotations

import torch

from tachyon.kernels._triton import pdl_args, pdl_trigger, pdl_wait, require_triton, tl, triton
from tachyon.kernels.gemv import PDL_TRIGGER_MAX_BYTES, _mib_env

SMALL_M = 8  # gemm_small serves 2 <= M <= SMALL_M rows (decode batches of a few requests)
MID_M = 256  # the kernels take up to this many rows as one block (gemm_mid_sweep.py); the engine uses 2..SMALL_M
# (SWAP, BLOCK_N, BLOCK_K, num_warps, STAGES, SPLIT_K). SWAP 0: y = x W^T with the 16-row padded x tile
# as the MMA's M side; SWAP 1: y^T = W x^T with BLOCK_N weight rows as the M side (M >= 64, so Hopper's
# warpgroup MMA applies and the x rows are only its 16-wide N side), optionally split over K: fp32
# partials [SPLIT_K, M, N] summed in split order by a second kernel (deterministic).
SmallConfig = tuple[int, int, int, int, int, int]
# the four that won on the H200 sweep (of nine tried: gemv_sweep_h200.json). Narrower row blocks (32) and
# deeper K splits (8) lost on every 7B shape; on 0.6B o_proj a 32-row block won standalone (4.5 vs 4.7 us)
# but made the real B=8 step slower (1.19 vs 1.14 ms), so they are not candidates (gemv_sweep_m8_h200.json)
SMALL_CONFIGS: tuple[SmallConfig, ...] = ((0, 32, 256, 4, 4, 1), (0, 16, 512, 4, 3, 1), (1, 64, 128, 4, 4, 1),
                                          (1, 64, 128, 4, 4, 4))


@triton.jit
def _gemm_small_kernel(x_ptr, w_ptr, b_ptr, y_ptr, xs_ptr, ws_ptr, M, N, K, stride_xm, stride_wn,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, STAGES: tl.constexpr,
                       EVEN_K: tl.constexpr, HAS_BIAS: tl.constexpr, PRECISION: tl.constexpr,
                       PDL: tl.constexpr, TRIG: tl.constexpr, SCALED: tl.constexpr = False,
                       DOT_T: tl.constexpr = tl.bfloat16):
    """SWAP 0 - program p: y[:, p*BLOCK_N : (p+1)*BLOCK_N] for all M (<= BLOCK_M) rows with tensor-core
    dots; the weight tile is read once for every row. Rows past M / N are clamped for the loads,
    dropped at the store. TRIG: trigger the successor's early launch at the start. SCALED (FP8 W8A8): x and
    w hold e4m3 values, given to the dots as DOT_T (e4m3 itself, or an exact widening); rows' scales xs[m]
    and channels' ws[n] then scale the fp32 accumulator."""
    pdl_trigger(TRIG)
    pid = tl.program_id(0)
    n = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    m = tl.arange(0, BLOCK_M)
    w_rows = w_ptr + tl.minimum(n, N - 1).to(tl.int64) * stride_wn
    x_rows = x_ptr + tl.minimum(m, M - 1).to(tl.int64) * stride_xm
    k = tl.arange(0, BLOCK_K)
    kmask = k < K
    w = tl.load(w_rows[:, None] + k[None, :], mask=kmask[None, :], other=0.0)  # before the wait: a weight
    pdl_wait(PDL)
    x = tl.load(x_rows[:, None] + k[None, :], mask=kmask[None, :], other=0.0)
    if SCALED:
        x, w = x.to(DOT_T), w.to(DOT_T)
    acc = tl.dot(x, tl.trans(w), input_precision=PRECISION)
    for k0 in tl.range(BLOCK_K, K, BLOCK_K, num_stages=STAGES):
        k = k0 + tl.arange(0, BLOCK_K)
        if EVEN_K:
            x = tl.load(x_rows[:, None] + k[None, :])
            w = tl.load(w_rows[:, None] + k[None, :])
        else:
            kmask = k < K
            x = tl.load(x_rows[:, None] + k[None, :], mask=kmask[None, :], other=0.0)
            w = tl.load(w_rows[:, None] + k[None, :], mask=kmask[None, :], other=0.0)
        if SCALED:
            x, w = x.to(DOT_T), w.to(DOT_T)
        acc = tl.dot(x, tl.trans(w), acc, input_precision=PRECISION)
    if SCALED:
        acc *= (tl.load(xs_ptr + tl.minimum(m, M - 1))[:, None] * tl.load(ws_ptr + tl.minimum(n, N - 1))[None, :])
    if HAS_BIAS:
        acc += tl.load(b_ptr + n, mask=n < N, other=0.0).to(tl.float32)[None, :]
    tl.store(y_ptr + m[:, None] * N + n[None, :], acc.to(y_ptr.dtype.element_ty),
             mask=(m < M)[:, None] & (n < N)[None, :])


@triton.jit
def _gemm_swap_kernel(x_ptr, w_ptr, b_ptr, y_ptr, part_ptr, xs_ptr, ws_ptr, M, N, K, stride_xm, stride_wn, K_SPLIT,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, STAGES: tl.constexpr,
                      SPLIT_K: tl.constexpr, EVEN_K: tl.constexpr, HAS_BIAS: tl.constexpr,
                      PRECISION: tl.constexpr, PDL: tl.constexpr, TRIG: tl.constexpr, SCALED: tl.constexpr = False,
                      DOT_T: tl.constexpr = tl.bfloat16):
    """SWAP 1 - program (p, s): acc[BLOCK_N, BLOCK_M] = W[p-th BLOCK_N rows, s-th K_SPLIT columns] x^T.
    SPLIT_K == 1: y = acc^T (+ bias); else the fp32 partial goes to part[s] ([SPLIT_K, M, N]).
    TRIG and SCALED as in _gemm_small_kernel (a split's partial is scaled before it is stored)."""
    pdl_trigger(TRIG)
    pid = tl.program_id(0)
    ks = tl.program_id(1)
    n = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    m = tl.arange(0, BLOCK_M)
    w_rows = w_ptr + tl.minimum(n, N - 1).to(tl.int64) * stride_wn
    x_cols = x_ptr + tl.minimum(m, M - 1).to(tl.int64) * stride_xm
    k_lo = ks * K_SPLIT
    k_hi = tl.minimum(k_lo + K_SPLIT, K)
    k = k_lo + tl.arange(0, BLOCK_K)
    kmask = k < k_hi
    w = tl.load(w_rows[:, None] + k[None, :], mask=kmask[None, :], other=0.0)  # before the wait: a weight
    pdl_wait(PDL)
    xt = tl.load(x_cols[None, :] + k[:, None], mask=kmask[:, None], other=0.0)
    if SCALED:
        w, xt = w.to(DOT_T), xt.to(DOT_T)
    acc = tl.dot(w, xt, input_precision=PRECISION)
    for k0 in tl.range(k_lo + BLOCK_K, k_hi, BLOCK_K, num_stages=STAGES):
        k = k0 + tl.arange(0, BLOCK_K)
        if EVEN_K:
            w = tl.load(w_rows[:, None] + k[None, :])
            xt = tl.load(x_cols[None, :] + k[:, None])
        else:
            kmask = k < k_hi
            w = tl.load(w_rows[:, None] + k[None, :], mask=kmask[None, :], other=0.0)
            xt = tl.load(x_cols[None, :] + k[:, None], mask=kmask[:, None], other=0.0)
        if SCALED:
            w, xt = w.to(DOT_T), xt.to(DOT_T)
        acc = tl.dot(w, xt, acc, input_precision=PRECISION)
    if SCALED:
        acc *= (tl.load(ws_ptr + tl.minimum(n, N - 1))[:, None] * tl.load(xs_ptr + tl.minimum(m, M - 1))[None, :])
    mask = (n < N)[:, None] & (m < M)[None, :]
    if SPLIT_K == 1:
        if HAS_BIAS:
            acc += tl.load(b_ptr + n, mask=n < N, other=0.0).to(tl.float32)[:, None]
        tl.store(y_ptr + m[None, :] * N + n[:, None], acc.to(y_ptr.dtype.element_ty), mask=mask)
    else:
        tl.store(part_ptr + (ks * M + m[None, :]) * N + n[:, None], acc, mask=mask)


@triton.jit
def _split_k_sum_kernel(part_ptr, b_ptr, y_ptr, M, N, SPLIT_K: tl.constexpr, BLOCK: tl.constexpr,
                        HAS_BIAS: tl.constexpr, PDL: tl.constexpr):
    """y[i] = sum over s = 0 .. SPLIT_K-1 (in order) of part[s, i] (+ bias), for flat i over [M, N]; the bias
    (a weight) is read before pdl_wait."""
    pdl_trigger(PDL)
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < M * N
    if HAS_BIAS:
        bias = tl.load(b_ptr + i % N, mask=mask, other=0.0).to(tl.float32)
    pdl_wait(PDL)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for s in tl.static_range(SPLIT_K):
        acc += tl.load(part_ptr + s * M * N + i, mask=mask, other=0.0)
    if HAS_BIAS:
        acc += bias
    tl.store(y_ptr + i, acc.to(y_ptr.dtype.element_ty), mask=mask)


def _small_pdl(device: torch.device, weight_bytes: int) -> dict:
    """PDL launch arguments of the skinny GEMMs: always launched early (where PDL is on); TRIG as the GEMV's
    rule, up to PDL_TRIGGER_MAX_BYTES (TACHYON_PDL_SMALL_TRIGGER_MAX_MB overrides). The 7B gate_up (259 MiB,
    592 programs of 64 rows) without the trigger: B=8 step 4.27 -> 4.24 ms (decode_fused_session5/)."""
    args = pdl_args(device)
    limit = _mib_env("TACHYON_PDL_SMALL_TRIGGER_MAX_MB", PDL_TRIGGER_MAX_BYTES)
    return args | {"TRIG": args["PDL"] and weight_bytes <= limit}


def gemm_small_triton(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None,
                      config: SmallConfig | None = None, out_dtype: torch.dtype | None = None,
                      x_scale: torch.Tensor | None = None, w_scale: torch.Tensor | None = None) -> torch.Tensor:
    """x [M <= MID_M, K] (unit column stride) @ w^T (+ bias) -> [M, N] contiguous in out_dtype (default x's);
    fp32 accumulation, rounded once to out_dtype; the rows are one block (the next power of two >= max(M, 16)).
    With x_scale [M, 1] and w_scale [N] (FP8 W8A8: x and w
    float8_e4m3fn, out_dtype required): (x * x_scale) @ (w * w_scale)^T (+ bias)."""
    require_triton()
    M, K = x.shape
    N = w.shape[0]
    swap, block_n, block_k, num_warps, stages, split_k = config or SMALL_CONFIGS[0]
    assert 1 <= M <= MID_M and x.stride(-1) == 1 and w.stride(-1) == 1 and w.shape[1] == K
    block_m = max(16, triton.next_power_of_2(M))
    y = torch.empty(M, N, dtype=out_dtype or x.dtype, device=x.device)
    b = bias if bias is not None else w
    scaled = w_scale is not None
    # FP8 tiles go to the tensor cores as they are (widened to bf16 first they ran 1.5-4x slower on the H200,
    # session 11); the interpreter (CPU) widens them exactly to fp32
    fp8 = dict(SCALED=scaled, DOT_T=tl.float8e4nv if x.is_cuda else tl.float32) if scaled else {}
    xs, ws = (x_scale, w_scale) if scaled else (y, y)
    prec = "ieee" if x.dtype == torch.float32 or (scaled and not x.is_cuda) else "tf32"
    pdl = _small_pdl(x.device, w.numel() * w.element_size())
    trig = pdl.pop("TRIG")
    if not swap:
        _gemm_small_kernel[(triton.cdiv(N, block_n),)](
            x, w, b, y, xs, ws, M, N, K, x.stride(0), w.stride(0),
            BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, STAGES=stages, EVEN_K=K % block_k == 0,
            HAS_BIAS=bias is not None, PRECISION=prec, num_warps=num_warps, TRIG=trig, **pdl, **fp8,
        )
        return y
    k_split = triton.cdiv(triton.cdiv(K, split_k), block_k) * block_k
    split_k = triton.cdiv(K, k_split)
    part = torch.empty(split_k, M, N, dtype=torch.float32, device=x.device) if split_k > 1 else y
    _gemm_swap_kernel[(triton.cdiv(N, block_n), split_k)](
        x, w, b, y, part, xs, ws, M, N, K, x.stride(0), w.stride(0), k_split,
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, STAGES=stages, SPLIT_K=split_k,
        EVEN_K=K % k_split == 0 and k_split % block_k == 0, HAS_BIAS=bias is not None, PRECISION=prec,
        num_warps=num_warps, TRIG=trig, **pdl, **fp8,
    )
    if split_k > 1:
        _split_k_sum_kernel[(triton.cdiv(M * N, 1024),)](part, b, y, M, N, SPLIT_K=split_k, BLOCK=1024,
                                                         HAS_BIAS=bias is not None, **pdl)
    return y
