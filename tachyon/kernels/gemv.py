"""Batch-1 GEMV y = x W^T (+ b) for decode at batch size 1, where cuBLAS picks small-tile kernels
that leave memory bandwidth unused on some projection shapes.

Contract (reference and Triton alike): x [1, K] (row-contiguous), w [N, K] (row-contiguous),
bias [N] or None -> y [1, N] in x's dtype, accumulated in fp32. The Triton kernel gives each
program BLOCK_N output rows and streams their K columns once; no split-K, so the sum order is fixed
(deterministic). `pick_gemv_config` times cuBLAS against a few block shapes on the real weight and
returns a config only when the kernel is both correct (rel. error <= 1e-2 vs cuBLAS) and faster:
GEMMs stay on cuBLAS unless the kernel measurably wins.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tachyon.kernels._triton import HAS_TRITON, require_triton, tl, triton

CONFIGS = ((4, 512), (8, 512), (16, 256))  # (BLOCK_N, BLOCK_K) candidates


def gemv_ref(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None,
             config: tuple[int, int] | None = None) -> torch.Tensor:
    """Plain torch (cuBLAS on GPU)."""
    return F.linear(x, w, bias)


@triton.jit
def _gemv_kernel(x_ptr, w_ptr, b_ptr, y_ptr, N, K, stride_wn,
                 BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, HAS_BIAS: tl.constexpr):
    pid = tl.program_id(0)
    n = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    nmask = n < N
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + tl.arange(0, BLOCK_K)
        kmask = k < K
        x = tl.load(x_ptr + k, mask=kmask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + n[:, None].to(tl.int64) * stride_wn + k[None, :],
                    mask=nmask[:, None] & kmask[None, :], other=0.0).to(tl.float32)
        acc += tl.sum(w * x[None, :], axis=1)
    if HAS_BIAS:
        acc += tl.load(b_ptr + n, mask=nmask, other=0.0).to(tl.float32)
    tl.store(y_ptr + n, acc.to(y_ptr.dtype.element_ty), mask=nmask)


def gemv_triton(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None,
                config: tuple[int, int] | None = None) -> torch.Tensor:
    require_triton()
    assert x.dim() == 2 and x.shape[0] == 1 and x.stride(-1) == 1 and w.stride(-1) == 1
    N, K = w.shape
    block_n, block_k = config or CONFIGS[1]
    y = torch.empty(1, N, dtype=x.dtype, device=x.device)
    _gemv_kernel[(triton.cdiv(N, block_n),)](
        x, w, bias if bias is not None else w, y, N, K, w.stride(0),
        BLOCK_N=block_n, BLOCK_K=block_k, HAS_BIAS=bias is not None, num_warps=4,
    )
    return y


def _time_ms(fn, iters: int = 30) -> float:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iters


def pick_gemv_config(w: torch.Tensor, bias: torch.Tensor | None) -> tuple[int, int] | None:
    """CUDA only: the fastest correct Triton config for x [1, K] @ w^T, or None if cuBLAS is at least
    as fast (or anything goes wrong: the engine then simply keeps cuBLAS)."""
    if not (HAS_TRITON and w.is_cuda and w.dim() == 2 and w.stride(-1) == 1):
        return None
    try:
        x = torch.randn(1, w.shape[1], device=w.device, dtype=w.dtype)
        ref = F.linear(x, w, bias).float()
        best, best_ms = None, _time_ms(lambda: F.linear(x, w, bias))
        for cfg in CONFIGS:
            out = gemv_triton(x, w, bias, cfg).float()
            err = ((out - ref).norm() / ref.norm().clamp_min(1e-30)).item()
            if not err <= 1e-2:
                continue
            ms = _time_ms(lambda cfg=cfg: gemv_triton(x, w, bias, cfg))
            if ms < 0.95 * best_ms:
                best, best_ms = cfg, ms
        return best
    except Exception:  # noqa: BLE001 - a kernel that fails to build or run is simply not used
        return None
