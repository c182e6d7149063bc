"""Skinny GEMMs for decode, where cuBLAS picks small-tile kernels that leave memory bandwidth unused.

Contract (reference and Triton alike): `gemv`: x [1, K] (row-contiguous), w [N, K] (row-contiguous),
bias [N] or None -> y [1, N] in x's dtype, accumulated in fp32. The Triton GEMV gives each program
BLOCK_N output features and streams their K columns once, accumulating elementwise products in a
[BLOCK_N, BLOCK_K] fp32 tile (no cross-thread reduction inside the loop) reduced once at the end;
loads are software-pipelined over STAGES iterations; a config is (BLOCK_N, BLOCK_K, num_warps, STAGES).
Two fused variants compute the GEMV's input in its prologue, saving a kernel and a round trip per
projection: `rmsnorm_gemv` (RMSNorm of x + residual in one pass: the 1/rms factor scales the finished dot
products, so the normalised row is never rounded to the dtype — within bf16 rounding of the unfused
pair; also returns the new residual stream) and `silu_gemv` (silu(gate) * up of a gate|up row, rounded
as the standalone kernel rounds it).
All kernels here load their first weight tile before waiting on the previous kernel (PDL, _triton.py).
`gemm_small` serves 2..SMALL_M rows, reading each weight tile once for all rows with tensor-core dots
(see SMALL_CONFIGS); its optional split-K writes fp32 partials summed in a fixed order, so every
sum order here is fixed (deterministic).
Which config (if any) a weight uses is decided at warm-up by gemv_select.py.
"""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F

from tachyon.kernels._triton import pdl_args, pdl_trigger, pdl_wait, require_triton, sm_count, tl, triton

# bumped whenever a kernel here changes what it computes or how fast it runs: part of the tuning key
# (kernels/tuning.py), so remembered choices measured on older code are not reused
KERNEL_VERSION = 2
GemvConfig = tuple[int, int, int, int]  # (BLOCK_N, BLOCK_K, num_warps, STAGES)
# small BLOCK_N so even N = 1024 gives hundreds of programs; BLOCK_K x STAGES keeps weight bytes in flight
# candidates: those that won on some Qwen2.5-7B / Qwen3-0.6B projection on the H200 (gemv_sweep_h200.json);
# every candidate is a Triton compile at a cold start, so the list stays short
CONFIGS: tuple[GemvConfig, ...] = ((2, 2048, 4, 1), (4, 1024, 4, 1), (4, 1024, 4, 3), (8, 512, 4, 3))
# extra candidate for the fused (prologue) kernels besides the plain winner: every program re-reads the
# K-long input for the RMS pre-pass, so a wider BLOCK_N (fewer programs) can pay off there
FUSED_CONFIGS: tuple[GemvConfig, ...] = ((16, 512, 8, 2),)


def gemv_ref(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None,
             config: GemvConfig | None = None) -> torch.Tensor:
    """Plain torch (cuBLAS on GPU)."""
    return F.linear(x, w, bias)


@triton.jit
def _x_chunk(x_ptr, r_ptr, nw_ptr, k, kmask, K, PROLOGUE: tl.constexpr, HAS_RES: tl.constexpr):
    """The GEMV input at columns k from its sources, in fp32: x itself (PROLOGUE 0); for RMSNorm (1)
    h = x (+ residual, rounded to the dtype as the standalone kernel rounds it) times the norm weight,
    *not yet* scaled by 1/rms (the caller applies it to the finished dot products); silu(gate) * up of a
    [1, 2K] gate|up row (2). Returns (input chunk, h chunk for PROLOGUE 1)."""
    x = tl.load(x_ptr + k, mask=kmask, other=0.0)
    h = x
    if PROLOGUE == 1:
        if HAS_RES:
            r = tl.load(r_ptr + k, mask=kmask, other=0.0)
            h = (x.to(tl.float32) + r.to(tl.float32)).to(x.dtype)
        nw = tl.load(nw_ptr + k, mask=kmask, other=0.0)
        xe = h.to(tl.float32) * nw.to(tl.float32)
    elif PROLOGUE == 2:
        u = tl.load(x_ptr + K + k, mask=kmask, other=0.0)
        gf = x.to(tl.float32)
        act = (gf / (1.0 + tl.exp(-gf))).to(x.dtype)
        xe = (act.to(tl.float32) * u.to(tl.float32)).to(x.dtype).to(tl.float32)
    else:
        xe = x.to(tl.float32)
    return xe, h


@triton.jit
def _gemv_kernel(x_ptr, w_ptr, b_ptr, y_ptr, r_ptr, nw_ptr, h_ptr, xs_ptr, ws_ptr, eps, N, K, stride_wn,
                 BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, STAGES: tl.constexpr, EVEN_K: tl.constexpr,
                 HAS_BIAS: tl.constexpr, PROLOGUE: tl.constexpr, HAS_RES: tl.constexpr, PDL: tl.constexpr,
                 TRIG: tl.constexpr, TRIG_FROM: tl.constexpr = 0, SCALED: tl.constexpr = False):
    """Program p: y[0, p*BLOCK_N : (p+1)*BLOCK_N]. Rows past N are clamped to N - 1 for the loads
    (always in bounds, no row mask) and dropped at the store. The first weight tile is loaded before
    pdl_wait (weights are never written by a kernel), so under PDL it streams while the previous kernel
    finishes. PROLOGUE 1 is one pass: rmsnorm(h) . w = rsqrt(mean(h^2) + eps) * sum_k h_k nw_k w_k, so the
    sum of squares accumulates beside the dot products and 1/rms scales the result; program 0 writes h.
    PDL: launched early, waits for the previous kernel; TRIG: lets the next kernel launch early, from program
    TRIG_FROM on when it is > 0 (the next kernel then launches once those have started and the others
    finished: during the last wave of a multi-wave grid, _gemv_pdl). SCALED (FP8 W8A8, quant_fp8.py): x and w
    hold e4m3 values; the dot products are scaled by x's row scale xs[0] and the channels' ws[n]."""
    if TRIG_FROM > 0:
        if tl.program_id(0) >= TRIG_FROM:
            pdl_trigger(TRIG)
    else:
        pdl_trigger(TRIG)
    pid = tl.program_id(0)
    n = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    nmask = n < N
    w_rows = w_ptr + tl.minimum(n, N - 1).to(tl.int64) * stride_wn
    k = tl.arange(0, BLOCK_K)
    kmask = k < K
    if EVEN_K:
        w = tl.load(w_rows[:, None] + k[None, :])
    else:
        w = tl.load(w_rows[:, None] + k[None, :], mask=kmask[None, :], other=0.0)
    pdl_wait(PDL)
    xe, h = _x_chunk(x_ptr, r_ptr, nw_ptr, k, kmask, K, PROLOGUE, HAS_RES)
    acc = w.to(tl.float32) * xe[None, :]
    hf = h.to(tl.float32)
    ss = hf * hf
    if PROLOGUE == 1 and HAS_RES:
        if pid == 0:
            tl.store(h_ptr + k, h, mask=kmask)
    for k0 in tl.range(BLOCK_K, K, BLOCK_K, num_stages=STAGES):
        k = k0 + tl.arange(0, BLOCK_K)
        if EVEN_K:
            kmask = k < k0 + BLOCK_K  # all true; lets the compiler drop the mask
            w = tl.load(w_rows[:, None] + k[None, :])
        else:
            kmask = k < K
            w = tl.load(w_rows[:, None] + k[None, :], mask=kmask[None, :], other=0.0)
        xe, h = _x_chunk(x_ptr, r_ptr, nw_ptr, k, kmask, K, PROLOGUE, HAS_RES)
        acc += w.to(tl.float32) * xe[None, :]
        if PROLOGUE == 1:
            hf = h.to(tl.float32)
            ss += hf * hf
            if HAS_RES:
                if pid == 0:
                    tl.store(h_ptr + k, h, mask=kmask)
    y = tl.sum(acc, axis=1)
    if PROLOGUE == 1:
        y = y * tl.rsqrt(tl.sum(ss, 0) / K + eps)
    if SCALED:
        y = y * tl.load(xs_ptr) * tl.load(ws_ptr + tl.minimum(n, N - 1))
    if HAS_BIAS:
        y += tl.load(b_ptr + n, mask=nmask, other=0.0).to(tl.float32)
    tl.store(y_ptr + n, y.to(y_ptr.dtype.element_ty), mask=nmask)


# a batch-1 GEMV reading more weight bytes than this does not trigger its successor's early launch
PDL_TRIGGER_MAX_BYTES = 160 << 20


def _mib_env(name: str, default: int) -> int:
    """Bytes from a MiB-valued environment knob (unset, empty or 0: `default`)."""
    return int(float(os.environ.get(name) or 0) * (1 << 20)) or default


def _gemv_pdl(device: torch.device, weight_bytes: int, programs: int = 0) -> dict:
    """PDL launch arguments of the batch-1 GEMV: PDL (launched early, waits for its predecessor) and TRIG
    (triggers its successor's early launch at its start). Default ("auto"): every GEMV launches early; one
    reading more than PDL_TRIGGER_MAX_BYTES does not trigger. On the H200, early launches cut Qwen3-0.6B's
    bs1 step from 1.02 to 0.80 ms (pdl_ab_h200.json); on the Qwen2.5-7B bs1 step, qkv and o_proj (31.5
    and 24.5 MiB) with PDL took it from 4.006 to 3.94 ms, down (129.5 MiB) as well to 3.89 ms
    (gemv_pdl_prefetch_ab_h200.json, gemv_pdl_threshold_ab_h200.json). The multi-wave gate_up (259 MiB,
    9,472 programs) costs 0.34-0.39 ms per step when it triggers at its start, launched early or not, but
    gains 0.015 ms launched early without the trigger (decode_fused_session5/): the successor's programs
    launched early sit on the SMs gate_up's later waves need. TACHYON_PDL_GEMV_MAX_MB /
    TACHYON_PDL_GEMV_TRIGGER_MAX_MB set the two limits (A/B knobs); TACHYON_PDL_GEMV = start | off: both
    for every GEMV, or neither. TACHYON_PDL_GEMV_LAST_WAVE=k (an A/B knob, off by default; not yet measured):
    a GEMV that does not trigger at its start triggers from program `programs - k * SMs` on (TRIG_FROM), so
    its successor launches during its last wave, when no later wave needs the SM slots."""
    args = pdl_args(device)
    mode = os.environ.get("TACHYON_PDL_GEMV", "auto")
    if not args["PDL"] or mode == "off":
        return {"PDL": False, "TRIG": False}
    if mode == "start":
        return args | {"TRIG": True}
    on = args if weight_bytes <= _mib_env("TACHYON_PDL_GEMV_MAX_MB", 1 << 62) else {"PDL": False}
    if weight_bytes <= _mib_env("TACHYON_PDL_GEMV_TRIGGER_MAX_MB", PDL_TRIGGER_MAX_BYTES):
        return on | {"TRIG": True}
    last = int(os.environ.get("TACHYON_PDL_GEMV_LAST_WAVE") or 0) * sm_count(device)
    if last > 0 and programs > last:
        return on | {"TRIG": True, "TRIG_FROM": programs - last}
    return on | {"TRIG": False}


def _launch(x, w, bias, config, prologue=0, residual=None, norm_w=None, h=None, eps=0.0,
            out_dtype: torch.dtype | None = None, x_scale=None, w_scale=None) -> torch.Tensor:
    require_triton()
    N, K = w.shape
    block_n, block_k, num_warps, stages = config or CONFIGS[0]
    y = torch.empty(1, N, dtype=out_dtype or x.dtype, device=x.device)
    programs = triton.cdiv(N, block_n)
    _gemv_kernel[(programs,)](
        x, w, bias if bias is not None else w, y, residual if residual is not None else x,
        norm_w if norm_w is not None else x, h if h is not None else y, x_scale if x_scale is not None else y,
        w_scale if w_scale is not None else y, eps, N, K, w.stride(0),
        BLOCK_N=block_n, BLOCK_K=block_k, STAGES=stages, EVEN_K=K % block_k == 0, HAS_BIAS=bias is not None,
        PROLOGUE=prologue, HAS_RES=residual is not None, num_warps=num_warps, SCALED=w_scale is not None,
        **_gemv_pdl(x.device, w.numel() * w.element_size(), programs),
    )
    return y


def gemv_triton(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None,
                config: GemvConfig | None = None, out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """x [1, K] @ w^T (+ bias) -> [1, N] in out_dtype (default x's): the fp32 accumulator is rounded once,
    to that dtype."""
    assert x.dim() == 2 and x.shape[0] == 1 and x.stride(-1) == 1 and w.stride(-1) == 1
    return _launch(x, w, bias, config, out_dtype=out_dtype)


SMALL_M = 8  # gemm_small serves 2 <= M <= SMALL_M rows (decode batches of a few requests)
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
    """x [M <= 16, K] (unit column stride) @ w^T (+ bias) -> [M, N] contiguous in out_dtype (default x's);
    fp32 accumulation, rounded once to out_dtype. With x_scale [M, 1] and w_scale [N] (FP8 W8A8: x and w
    float8_e4m3fn, out_dtype required): (x * x_scale) @ (w * w_scale)^T (+ bias)."""
    require_triton()
    M, K = x.shape
    N = w.shape[0]
    swap, block_n, block_k, num_warps, stages, split_k = config or SMALL_CONFIGS[0]
    assert 1 <= M <= 16 and x.stride(-1) == 1 and w.stride(-1) == 1 and w.shape[1] == K
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
            BLOCK_M=16, BLOCK_N=block_n, BLOCK_K=block_k, STAGES=stages, EVEN_K=K % block_k == 0,
            HAS_BIAS=bias is not None, PRECISION=prec, num_warps=num_warps, TRIG=trig, **pdl, **fp8,
        )
        return y
    k_split = triton.cdiv(triton.cdiv(K, split_k), block_k) * block_k
    split_k = triton.cdiv(K, k_split)
    part = torch.empty(split_k, M, N, dtype=torch.float32, device=x.device) if split_k > 1 else y
    _gemm_swap_kernel[(triton.cdiv(N, block_n), split_k)](
        x, w, b, y, part, xs, ws, M, N, K, x.stride(0), w.stride(0), k_split,
        BLOCK_M=16, BLOCK_N=block_n, BLOCK_K=block_k, STAGES=stages, SPLIT_K=split_k,
        EVEN_K=K % k_split == 0 and k_split % block_k == 0, HAS_BIAS=bias is not None, PRECISION=prec,
        num_warps=num_warps, TRIG=trig, **pdl, **fp8,
    )
    if split_k > 1:
        _split_k_sum_kernel[(triton.cdiv(M * N, 1024),)](part, b, y, M, N, SPLIT_K=split_k, BLOCK=1024,
                                                         HAS_BIAS=bias is not None, **pdl)
    return y


def rmsnorm_gemv_ref(x: torch.Tensor, residual: torch.Tensor | None, norm_w: torch.Tensor, eps: float,
                     w: torch.Tensor, bias: torch.Tensor | None = None,
                     config: GemvConfig | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(linear(rmsnorm(x + residual)), x + residual); x itself as the residual stream when None."""
    from tachyon.kernels.rmsnorm import rmsnorm_ref

    out, h = rmsnorm_ref(x, norm_w, eps, residual)
    return F.linear(out, w, bias), h


def rmsnorm_gemv_triton(x: torch.Tensor, residual: torch.Tensor | None, norm_w: torch.Tensor, eps: float,
                        w: torch.Tensor, bias: torch.Tensor | None = None,
                        config: GemvConfig | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """One kernel at batch 1: RMSNorm (+ residual add) in the GEMV's prologue. x, residual [1, K] contiguous."""
    assert x.shape[0] == 1 and x.is_contiguous() and (residual is None or residual.is_contiguous())
    h = torch.empty_like(x) if residual is not None else x
    y = _launch(x, w, bias, config, 1, residual, norm_w, h if residual is not None else None, eps)
    return y, h


def silu_gemv_ref(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None,
                  config: GemvConfig | None = None) -> torch.Tensor:
    """linear(silu(gate) * up) of a gate|up row x [1, 2K]."""
    from tachyon.kernels.activation import silu_and_mul_ref

    return F.linear(silu_and_mul_ref(x), w, bias)


def silu_gemv_triton(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None,
                     config: GemvConfig | None = None) -> torch.Tensor:
    """One kernel at batch 1: SiLU-and-mul in the GEMV's prologue. x [1, 2K] contiguous."""
    assert x.shape[0] == 1 and x.is_contiguous() and x.shape[1] == 2 * w.shape[1]
    return _launch(x, w, bias, config, 2)
