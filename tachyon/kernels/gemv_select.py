"""Warm-up choice of the skinny-GEMM kernels in gemv.py, per weight.

`pick_*_config` time cuBLAS (or the unfused pair) against the candidates on the real weight inside
CUDA graphs (host launch cost, which the engine's graphs remove, does not decide; weights cycled past
the L2) and return a config only when the kernel is correct (rel. error <= 1e-2) and at least 3%
faster: GEMMs stay on cuBLAS unless the kernel measurably wins. CUDA only; anything that fails to
build or run simply yields None (cuBLAS). Timing allocates temporary weight copies.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tachyon.kernels import quant_fp8 as q8
from tachyon.kernels._triton import HAS_TRITON
from tachyon.kernels.gemm_small import SMALL_CONFIGS, SMALL_M, SmallConfig, gemm_small_triton
from tachyon.kernels.gemv import (
    CONFIGS,
    FUSED_CONFIGS,
    GemvConfig,
    gemv_triton,
    rmsnorm_gemv_triton,
    silu_gemv_triton,
)


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


def _pick(w: torch.Tensor, baseline, candidate, l2_bytes: int, configs: tuple = CONFIGS) -> tuple | None:
    """The fastest correct config of `candidate(w_i, cfg)` if it beats `baseline(w_i)` by 3%, else None. A config
    that fails to build or launch here (e.g. more shared memory than this GPU has) is skipped, not the rest."""
    copies = max(1, -(-l2_bytes // (w.numel() * w.element_size())))
    weights = [w] + [w.clone() for _ in range(copies - 1)]
    ref = baseline(w).float()
    best, best_ms = None, _graph_time_ms(baseline, weights)
    for cfg in configs:
        try:
            out = candidate(w, cfg).float()
        except Exception:  # noqa: BLE001 - that config is unusable here; the others still compete
            continue
        err = ((out - ref).norm() / ref.norm().clamp_min(1e-30)).item()
        if not err <= 1e-2:
            continue
        ms = _graph_time_ms(lambda wi, cfg=cfg: candidate(wi, cfg), weights)
        if ms < 0.97 * best_ms:
            best, best_ms = cfg, ms
    return best


def pick_gemv_config(w: torch.Tensor, bias: torch.Tensor | None, l2_bytes: int = 160 << 20) -> GemvConfig | None:
    """CUDA only: the fastest correct Triton config for x [1, K] @ w^T, or None unless it beats cuBLAS by
    3% (or if anything goes wrong: the engine then simply keeps cuBLAS). Timing cycles through copies
    of `w` totalling at least `l2_bytes` (temporary memory)."""
    if not (HAS_TRITON and w.is_cuda and w.dim() == 2 and w.stride(-1) == 1):
        return None
    try:
        x = torch.randn(1, w.shape[1], device=w.device, dtype=w.dtype)
        return _pick(w, lambda wi: F.linear(x, wi, bias), lambda wi, cfg: gemv_triton(x, wi, bias, cfg), l2_bytes)
    except Exception:  # noqa: BLE001 - a kernel that fails to build or run is simply not used
        return None


def _pick_fp8(w_q: torch.Tensor, w_scale: torch.Tensor, bias: torch.Tensor | None, m: int, kernel, configs: tuple,
              l2_bytes: int) -> tuple | None:
    """The W8A8 `kernel(x, w, scale, bias, config)` at m rows against cuBLASLt's scaled GEMM, both after the same
    row quantization (inside each call), over `configs`; None on CPU or if anything goes wrong."""
    if not (HAS_TRITON and w_q.is_cuda and w_q.dim() == 2 and w_q.stride(-1) == 1):
        return None
    try:
        x = torch.randn(m, w_q.shape[1], device=w_q.device, dtype=torch.bfloat16)
        return _pick(w_q, lambda wi: q8.fp8_linear_cuda(x, wi, w_scale, bias),
                     lambda wi, cfg: kernel(x, wi, w_scale, bias, cfg), l2_bytes, configs)
    except Exception:  # noqa: BLE001 - a kernel that fails to build or run is simply not used
        return None


def pick_fp8_gemv_config(w_q: torch.Tensor, w_scale: torch.Tensor, bias: torch.Tensor | None,
                         l2_bytes: int = 160 << 20) -> GemvConfig | None:
    """CUDA only: like pick_gemv_config for an FP8 weight (quant_fp8.py): the batch-1 W8A8 GEMV over
    FP8_GEMV_CONFIGS against cuBLASLt's scaled GEMM."""
    return _pick_fp8(w_q, w_scale, bias, 1, q8.fp8_gemv_triton, q8.FP8_GEMV_CONFIGS, l2_bytes)


def pick_fp8_small_config(w_q: torch.Tensor, w_scale: torch.Tensor, bias: torch.Tensor | None, m: int = SMALL_M,
                          l2_bytes: int = 160 << 20) -> SmallConfig | None:
    """CUDA only: like pick_small_config for an FP8 weight: the W8A8 skinny GEMM at m rows against cuBLASLt,
    over quant_fp8's candidates (the fast-accumulation ones too when that knob is on)."""
    configs = q8.FP8_SMALL_CONFIGS + (q8.FP8_SMALL_FAST_CONFIGS if q8.fast_accum() else ())
    return _pick_fp8(w_q, w_scale, bias, m, q8.fp8_gemm_small_triton, configs, l2_bytes)


def pick_small_config(w: torch.Tensor, bias: torch.Tensor | None, m: int = SMALL_M,
                      l2_bytes: int = 160 << 20) -> SmallConfig | None:
    """CUDA only: like pick_gemv_config, for gemm_small at m rows (the engine uses the result for
    2..SMALL_M rows: the weight read, which dominates, does not depend on m)."""
    if not (HAS_TRITON and w.is_cuda and w.dim() == 2 and w.stride(-1) == 1):
        return None
    try:
        x = torch.randn(m, w.shape[1], device=w.device, dtype=w.dtype)
        return _pick(w, lambda wi: F.linear(x, wi, bias), lambda wi, cfg: gemm_small_triton(x, wi, bias, cfg),
                     l2_bytes, SMALL_CONFIGS)
    except Exception:  # noqa: BLE001 - a kernel that fails to build or run is simply not used
        return None


def pick_fused_config(w: torch.Tensor, bias: torch.Tensor | None, prologue: str, plain: GemvConfig | None,
                      norm_w: torch.Tensor | None = None, eps: float = 1e-6,
                      l2_bytes: int = 160 << 20) -> GemvConfig | None:
    """CUDA only: the fastest correct fused config ("rmsnorm" or "silu" prologue) if it beats the unfused
    pair the engine would otherwise run (the standalone Triton kernel, then the GEMV with `plain` or
    cuBLAS) by 3%; else None."""
    if prologue not in ("rmsnorm", "silu"):
        raise ValueError(f"prologue must be 'rmsnorm' or 'silu', got {prologue!r}")
    if not (HAS_TRITON and w.is_cuda and w.dim() == 2 and w.stride(-1) == 1):
        return None
    try:
        from tachyon.kernels.activation import silu_and_mul_triton
        from tachyon.kernels.rmsnorm import rmsnorm_triton

        K = w.shape[1]

        def linear(a, wi):
            return gemv_triton(a, wi, bias, plain) if plain is not None else F.linear(a, wi, bias)

        configs = tuple(dict.fromkeys(((plain,) if plain is not None else ()) + FUSED_CONFIGS))
        if prologue == "rmsnorm":
            x, r = (torch.randn(1, K, device=w.device, dtype=w.dtype) for _ in range(2))
            return _pick(w, lambda wi: linear(rmsnorm_triton(x, norm_w, eps, r)[0], wi),
                         lambda wi, cfg: rmsnorm_gemv_triton(x, r, norm_w, eps, wi, bias, cfg)[0], l2_bytes, configs)
        x = torch.randn(1, 2 * K, device=w.device, dtype=w.dtype)
        return _pick(w, lambda wi: linear(silu_and_mul_triton(x), wi),
                     lambda wi, cfg: silu_gemv_triton(x, wi, bias, cfg), l2_bytes, configs)
    except Exception:  # noqa: BLE001 - a kernel that fails to build or run is simply not used
        return None


def pick_glu_config(w: torch.Tensor, bias: torch.Tensor | None, plain: GemvConfig | None,
                    l2_bytes: int = 160 << 20) -> GemvConfig | None:
    """CUDA only: the fastest correct config of the gate|up GEMV with its SiLU-and-mul epilogue (gemv_glu.py)
    if it beats the pair the engine would otherwise run (the GEMV with `plain` or cuBLAS, then the
    activation kernel) by 3%; else None."""
    if not (HAS_TRITON and w.is_cuda and w.dim() == 2 and w.stride(-1) == 1 and w.shape[0] % 2 == 0):
        return None
    try:
        from tachyon.kernels.activation import silu_and_mul_triton
        from tachyon.kernels.gemv_glu import gemv_glu_triton

        x = torch.randn(1, w.shape[1], device=w.device, dtype=w.dtype)

        def pair(wi):
            y = gemv_triton(x, wi, bias, plain) if plain is not None else F.linear(x, wi, bias)
            return silu_and_mul_triton(y)

        configs = tuple(dict.fromkeys(((plain,) if plain is not None else ()) + CONFIGS))
        return _pick(w, pair, lambda wi, cfg: gemv_glu_triton(x, wi, bias, cfg), l2_bytes, configs)
    except Exception:  # noqa: BLE001 - a kernel that fails to build or run is simply not used
        return None
