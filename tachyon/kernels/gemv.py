"""Skinny GEMM y = x W^T (+ b) for decode at batch sizes 1-8, where cuBLAS picks small-tile kernels
that leave memory bandwidth unused on some projection shapes.

Contract (reference and Triton alike): x [M, K] with M <= MAX_M (rows contiguous, any row stride),
w [N, K] (row-contiguous), bias [N] or None -> y [M, N] contiguous in x's dtype, accumulated in fp32.
The Triton kernel gives each program BLOCK_N output features and streams their K columns once for
all M rows (the weight is read once whatever M is); no split-K, so the sum order is fixed
(deterministic). A config is (BLOCK_M, BLOCK_N, BLOCK_K, num_warps); BLOCK_M >= M.
`pick_gemv_config` times cuBLAS against the candidates on the real weight inside CUDA graphs (so
host launch cost, which the engine's graphs remove, does not decide) and returns a config only when
the kernel is correct (rel. error <= 1e-2 vs cuBLAS) and faster: GEMMs stay on cuBLAS unless the
kernel measurably wins.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tachyon.kernels._triton import HAS_TRITON, require_triton, tl, triton

MAX_M = 8
GemvConfig = tuple[int, int, int, int]  # (BLOCK_M, BLOCK_N, BLOCK_K, num_warps)
# candidates per BLOCK_M: small BLOCK_N so even N = 1024 gives hundreds of programs; large BLOCK_K so
# each program keeps many bytes of the weight in flight (no split-K needed at these sizes)
CONFIGS: dict[int, tuple[GemvConfig, ...]] = {
    1: ((1, 4, 1024, 4), (1, 8, 512, 4), (1, 8, 1024, 8), (1, 16, 512, 8), (1, 2, 2048, 4), (1, 16, 256, 4)),
    8: ((8, 4, 256, 4), (8, 8, 256, 8), (8, 16, 128, 8)),
}


def gemv_ref(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None,
             config: GemvConfig | None = None) -> torch.Tensor:
    """Plain torch (cuBLAS on GPU)."""
    return F.linear(x, w, bias)


@triton.jit
def _gemv_kernel(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, stride_xm, stride_wn,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                 EVEN_K: tl.constexpr, HAS_BIAS: tl.constexpr):
    """Program p: y[:, p*BLOCK_N : (p+1)*BLOCK_N] for all M rows. Rows past N are clamped to N - 1 for
    the loads (always in bounds, no load mask) and dropped at the store."""
    pid = tl.program_id(0)
    n = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    nmask = n < N
    w_rows = w_ptr + tl.minimum(n, N - 1).to(tl.int64) * stride_wn
    m = tl.arange(0, BLOCK_M)
    mmask = m < M
    x_rows = x_ptr + m.to(tl.int64) * stride_xm
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + tl.arange(0, BLOCK_K)
        if EVEN_K:
            w = tl.load(w_rows[:, None] + k[None, :]).to(tl.float32)
            x = tl.load(x_rows[:, None] + k[None, :], mask=mmask[:, None], other=0.0).to(tl.float32)
        else:
            kmask = k < K
            w = tl.load(w_rows[:, None] + k[None, :], mask=kmask[None, :], other=0.0).to(tl.float32)
            x = tl.load(x_rows[:, None] + k[None, :], mask=mmask[:, None] & kmask[None, :], other=0.0).to(tl.float32)
        acc += tl.sum(x[:, None, :] * w[None, :, :], axis=2)
    if HAS_BIAS:
        acc += tl.load(b_ptr + n, mask=nmask, other=0.0).to(tl.float32)[None, :]
    tl.store(y_ptr + m[:, None] * N + n[None, :], acc.to(y_ptr.dtype.element_ty),
             mask=mmask[:, None] & nmask[None, :])


def gemv_triton(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None,
                config: GemvConfig | None = None) -> torch.Tensor:
    require_triton()
    M, K = x.shape
    N = w.shape[0]
    block_m, block_n, block_k, num_warps = config or CONFIGS[1][0]
    assert M <= block_m and x.stride(-1) == 1 and w.stride(-1) == 1 and w.shape[1] == K
    y = torch.empty(M, N, dtype=x.dtype, device=x.device)
    _gemv_kernel[(triton.cdiv(N, block_n),)](
        x, w, bias if bias is not None else w, y, M, N, K, x.stride(0), w.stride(0),
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, EVEN_K=K % block_k == 0, HAS_BIAS=bias is not None,
        num_warps=num_warps,
    )
    return y


def _graph_time_ms(fn, weights: list[torch.Tensor], replays: int = 5) -> float:
    """GPU time of one `fn(w)` call, measured by replaying a CUDA graph of back-to-back calls that cycle
    through `weights` (copies whose total exceeds the L2 cache, so every call streams its weight from
    HBM as in a real decode step) — host launch overhead, which the engine's graphs remove, not counted."""
    calls = max(20, len(weights))
    fn(weights[0])
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn(weights[0])  # warm-up on the capture stream
    torch.cuda.current_stream().wait_stream(stream)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(calls):
            fn(weights[i % len(weights)])
    g.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        g.replay()
    end.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(end) / (calls * replays)
    del g
    return ms


def pick_gemv_config(w: torch.Tensor, bias: torch.Tensor | None, m: int = 1,
                     l2_bytes: int = 160 << 20) -> GemvConfig | None:
    """CUDA only: the fastest correct Triton config for x [m, K] @ w^T (m <= MAX_M), or None if cuBLAS
    is at least 3% faster (or anything goes wrong: the engine then simply keeps cuBLAS). Timing cycles
    through copies of `w` totalling at least `l2_bytes` (temporary memory)."""
    if not (HAS_TRITON and w.is_cuda and w.dim() == 2 and w.stride(-1) == 1 and 1 <= m <= MAX_M):
        return None
    try:
        x = torch.randn(m, w.shape[1], device=w.device, dtype=w.dtype)
        ref = F.linear(x, w, bias).float()
        copies = max(1, -(-l2_bytes // (w.numel() * w.element_size())))
        weights = [w] + [w.clone() for _ in range(copies - 1)]
        best, best_ms = None, _graph_time_ms(lambda wi: F.linear(x, wi, bias), weights)
        for cfg in CONFIGS[1 if m == 1 else MAX_M]:
            out = gemv_triton(x, w, bias, cfg).float()
            err = ((out - ref).norm() / ref.norm().clamp_min(1e-30)).item()
            if not err <= 1e-2:
                continue
            ms = _graph_time_ms(lambda wi, cfg=cfg: gemv_triton(x, wi, bias, cfg), weights)
            if ms < 0.97 * best_ms:
                best, best_ms = cfg, ms
        return best
    except Exception:  # noqa: BLE001 - a kernel that fails to build or run is simply not used
        return None
