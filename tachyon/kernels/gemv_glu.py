"""Batch-1 gate|up GEMV with the SiLU-and-mul in its epilogue: x [1, K] and a stacked gate|up weight [2I, K]
-> silu(x W_gate^T) * (x W_up^T) [1, I], one kernel instead of the GEMV and the activation kernel.

Program p computes activations p*BLOCK_N .. +BLOCK_N: the matching gate rows and up rows (I apart), each
dot product rounded to the dtype as the GEMV stores it, then SiLU and the product rounded as
activation.py rounds them, so the result equals the unfused pair's up to the dot products' summation
order. Like gemv.py's kernel it loads its first weight tiles before pdl_wait. Chosen per weight at
warm-up (gemv_select.pick_glu_config) where it beats the pair.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tachyon.kernels._triton import pdl_trigger, pdl_wait, require_triton, tl, triton
from tachyon.kernels.activation import silu_and_mul_ref
from tachyon.kernels.gemv import CONFIGS, GemvConfig, _gemv_pdl


def gemv_glu_ref(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None,
                 config: GemvConfig | None = None) -> torch.Tensor:
    """Plain torch: silu_and_mul(linear(x, w, bias))."""
    return silu_and_mul_ref(F.linear(x, w, bias))


@triton.jit
def _gemv_glu_kernel(x_ptr, w_ptr, b_ptr, y_ptr, INTER, K, stride_wn,
                     BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, STAGES: tl.constexpr, EVEN_K: tl.constexpr,
                     HAS_BIAS: tl.constexpr, PDL: tl.constexpr, TRIG: tl.constexpr):
    """Program p: y[0, p*BLOCK_N : (p+1)*BLOCK_N]. Rows past INTER are clamped to INTER - 1 for the loads and
    dropped at the store. The first gate and up tiles load before pdl_wait (weights are never written)."""
    pdl_trigger(TRIG)
    pid = tl.program_id(0)
    n = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    nmask = n < INTER
    nc = tl.minimum(n, INTER - 1).to(tl.int64)
    g_rows = w_ptr + nc * stride_wn
    u_rows = w_ptr + (nc + INTER) * stride_wn
    k = tl.arange(0, BLOCK_K)
    if EVEN_K:
        wg = tl.load(g_rows[:, None] + k[None, :])
        wu = tl.load(u_rows[:, None] + k[None, :])
    else:
        kmask = k < K
        wg = tl.load(g_rows[:, None] + k[None, :], mask=kmask[None, :], other=0.0)
        wu = tl.load(u_rows[:, None] + k[None, :], mask=kmask[None, :], other=0.0)
    pdl_wait(PDL)
    x = tl.load(x_ptr + k, mask=k < K, other=0.0).to(tl.float32)
    acc_g = wg.to(tl.float32) * x[None, :]
    acc_u = wu.to(tl.float32) * x[None, :]
    for k0 in tl.range(BLOCK_K, K, BLOCK_K, num_stages=STAGES):
        k = k0 + tl.arange(0, BLOCK_K)
        if EVEN_K:
            wg = tl.load(g_rows[:, None] + k[None, :])
            wu = tl.load(u_rows[:, None] + k[None, :])
        else:
            kmask = k < K
            wg = tl.load(g_rows[:, None] + k[None, :], mask=kmask[None, :], other=0.0)
            wu = tl.load(u_rows[:, None] + k[None, :], mask=kmask[None, :], other=0.0)
        x = tl.load(x_ptr + k, mask=k < K, other=0.0).to(tl.float32)
        acc_g += wg.to(tl.float32) * x[None, :]
        acc_u += wu.to(tl.float32) * x[None, :]
    g = tl.sum(acc_g, axis=1)
    u = tl.sum(acc_u, axis=1)
    if HAS_BIAS:
        g += tl.load(b_ptr + n, mask=nmask, other=0.0).to(tl.float32)
        u += tl.load(b_ptr + INTER + n, mask=nmask, other=0.0).to(tl.float32)
    dt = y_ptr.dtype.element_ty
    gf = g.to(dt).to(tl.float32)  # the gate|up row as the GEMV would store it
    act = (gf / (1.0 + tl.exp(-gf))).to(dt)  # silu, rounded to the dtype like activation.py
    y = act.to(tl.float32) * u.to(dt).to(tl.float32)
    tl.store(y_ptr + n, y.to(dt), mask=nmask)


def gemv_glu_triton(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None,
                    config: GemvConfig | None = None) -> torch.Tensor:
    """x [1, K] contiguous, w [2I, K] (gate rows, then up rows) -> [1, I] in x's dtype."""
    require_triton()
    assert x.dim() == 2 and x.shape[0] == 1 and x.stride(-1) == 1 and w.stride(-1) == 1
    N, K = w.shape
    assert N % 2 == 0 and x.shape[1] == K
    inter = N // 2
    block_n, block_k, num_warps, stages = config or CONFIGS[0]
    y = torch.empty(1, inter, dtype=x.dtype, device=x.device)
    programs = triton.cdiv(inter, block_n)
    pdl = _gemv_pdl(x.device, w.numel() * w.element_size())
    _gemv_glu_kernel[(programs,)](
        x, w, bias if bias is not None else w, y, inter, K, w.stride(0),
        BLOCK_N=block_n, BLOCK_K=block_k, STAGES=stages, EVEN_K=K % block_k == 0, HAS_BIAS=bias is not None,
        num_warps=num_warps, **pdl,
    )
    return y
