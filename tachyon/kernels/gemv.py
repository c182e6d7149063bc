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
The 2..SMALL_M-row skinny GEMM is gemm_small.py. Every sum order here is fixed (deterministic).
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
