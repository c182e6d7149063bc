"""GEMMs of short prefill steps (MID_MIN_M..MID_MAX_M rows), where cuBLAS's kernels cannot overlap their start
with the kernel before them and pick tiles that leave most SMs idle on small weights.

Contract (reference and Triton alike): `gemm_mid`: x [M, K] (unit column stride), w [N, K] (row-contiguous),
bias [N] or None -> y [M, N] contiguous in out_dtype (default x's), accumulated in fp32 and rounded once.
The Triton kernel gives each program a [BLOCK_M, BLOCK_N] output tile and loops over K with tensor-core dots;
it loads its first weight tile before waiting on the previous kernel (PDL, _triton.py), so under a chain of
PDL kernels its weight stream starts while the kernel before it finishes. A config is (BLOCK_M, BLOCK_N,
BLOCK_K, num_warps, STAGES); `mid_config(m, weight)` picks one from MID_CONFIGS, or None where cuBLAS stays.
"""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F

from tachyon.kernels._triton import pdl_args, pdl_trigger, pdl_wait, require_triton, tl, triton

MidConfig = tuple[int, int, int, int, int]  # (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, STAGES)
MID_MIN_M, MID_MAX_M = 9, 512


@triton.jit
def _gemm_mid_kernel(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, stride_xm, stride_wn,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, STAGES: tl.constexpr,
                     EVEN_K: tl.constexpr, HAS_BIAS: tl.constexpr, PRECISION: tl.constexpr, PDL: tl.constexpr):
    """Program (p, q): y[q-th BLOCK_M rows, p-th BLOCK_N columns]. Rows past M / N are clamped for the loads,
    dropped at the store. Consecutive programs share an x row block and walk the weight."""
    pdl_trigger(PDL)
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    w_rows = w_ptr + tl.minimum(n, N - 1).to(tl.int64) * stride_wn
    x_rows = x_ptr + tl.minimum(m, M - 1).to(tl.int64) * stride_xm
    k = tl.arange(0, BLOCK_K)
    kmask = k < K
    w = tl.load(w_rows[:, None] + k[None, :], mask=kmask[None, :], other=0.0)  # before the wait: a weight
    pdl_wait(PDL)
    x = tl.load(x_rows[:, None] + k[None, :], mask=kmask[None, :], other=0.0)
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
        acc = tl.dot(x, tl.trans(w), acc, input_precision=PRECISION)
    if HAS_BIAS:
        acc += tl.load(b_ptr + n, mask=n < N, other=0.0).to(tl.float32)[None, :]
    tl.store(y_ptr + m[:, None].to(tl.int64) * N + n[None, :], acc.to(y_ptr.dtype.element_ty),
             mask=(m < M)[:, None] & (n < N)[None, :])


def gemm_mid_ref(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None,
                 config: MidConfig | None = None, out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """fp32 x @ w^T (+ bias), rounded once to out_dtype (default x's)."""
    y = F.linear(x.float(), w.float(), None if bias is None else bias.float())
    return y.to(out_dtype or x.dtype)


def gemm_mid_triton(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None,
                    config: MidConfig | None = None, out_dtype: torch.dtype | None = None) -> torch.Tensor:
    require_triton()
    M, K = x.shape
    N = w.shape[0]
    block_m, block_n, block_k, num_warps, stages = config or MID_CONFIGS[0][1]
    assert x.stride(-1) == 1 and w.stride(-1) == 1 and w.shape[1] == K
    y = torch.empty(M, N, dtype=out_dtype or x.dtype, device=x.device)
    prec = "ieee" if x.dtype == torch.float32 else "tf32"
    _gemm_mid_kernel[(triton.cdiv(N, block_n), triton.cdiv(M, block_m))](
        x, w, bias if bias is not None else w, y, M, N, K, x.stride(0), w.stride(0),
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, STAGES=stages, EVEN_K=K % block_k == 0,
        HAS_BIAS=bias is not None, PRECISION=prec, num_warps=num_warps, **pdl_args(x.device),
    )
    return y


# (largest M, config) rows, first fit; filled from benchmarks/gpu/gemm_mid_sweep.py on the H200
MID_CONFIGS: tuple[tuple[int, MidConfig], ...] = (
    (64, (64, 32, 128, 4, 3)),
    (MID_MAX_M, (128, 64, 64, 4, 4)),
)


def mid_config(m: int, w: torch.Tensor) -> MidConfig | None:
    """The Triton config for an m-row product with weight w, or None for cuBLAS (m outside MID_MIN_M..MID_MAX_M,
    or TACHYON_GEMM_MID=0). TACHYON_GEMM_MID_CONFIG = BLOCK_M:BLOCK_N:BLOCK_K:num_warps:STAGES forces one
    (A/B knobs, read per call: a CUDA graph keeps what was in force at capture)."""
    if not MID_MIN_M <= m <= MID_MAX_M or os.environ.get("TACHYON_GEMM_MID", "1") == "0":
        return None
    env = os.environ.get("TACHYON_GEMM_MID_CONFIG", "")
    if env:
        try:
            bm, bn, bk, warps, stages = (int(v) for v in env.split(":"))
        except ValueError:
            raise ValueError(
                f"TACHYON_GEMM_MID_CONFIG must be BLOCK_M:BLOCK_N:BLOCK_K:num_warps:STAGES, got {env!r}") from None
        return bm, bn, bk, warps, stages
    return next(cfg for limit, cfg in MID_CONFIGS if m <= limit)
