"""Fused residual-add + RMSNorm with HF LlamaRMSNorm semantics.

Contract: x [..., H], weight [H], optional residual like x.
  h = x + residual (in x's dtype, as HF adds it) or x when residual is None;
  out = weight * (h.float() * rsqrt(mean(h.float()**2) + eps)).to(x.dtype);
  returns (out, h): h is the residual stream for the next layer. Inputs are not modified.
rmsnorm_quant(x, weight, eps, residual) -> ((q, scale), h): out as above (rounded to its dtype), then quantized
  per row to FP8 as quant_fp8.quantize_rows does, in the same kernel (the input of an FP8 projection); bit for
  bit quantize_rows(rmsnorm(...)[0]) of the same backend.
"""

import torch

from tachyon.kernels._triton import next_pow2, pdl_args, pdl_trigger, pdl_wait, require_triton, tl, triton
from tachyon.kernels.quant_fp8 import FP8, FP8_MAX, FP8_MIN_AMAX, quantize_rows_ref, round_e4m3


def rmsnorm_ref(
    x: torch.Tensor, weight: torch.Tensor, eps: float, residual: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Plain torch, exactly HF's op order."""
    h = x if residual is None else x + residual
    hf = h.float()
    normed = hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + eps)
    return weight * normed.to(x.dtype), h


def rmsnorm_quant_ref(
    x: torch.Tensor, weight: torch.Tensor, eps: float, residual: torch.Tensor | None = None
) -> tuple[tuple[torch.Tensor, torch.Tensor], torch.Tensor]:
    """Plain torch: the reference norm, then the reference row quantization."""
    out, h = rmsnorm_ref(x, weight, eps, residual)
    return quantize_rows_ref(out.reshape(-1, out.shape[-1])), h


@triton.jit
def _rmsnorm_kernel(
    x_ptr, r_ptr, w_ptr, out_ptr, h_ptr, s_ptr, stride_x, stride_r, eps,
    N: tl.constexpr, BLOCK: tl.constexpr, HAS_RES: tl.constexpr, QUANT: tl.constexpr, MIN_AMAX: tl.constexpr,
    PDL: tl.constexpr,
):
    """One program per row. QUANT: out_ptr is the FP8 output and s_ptr the per-row scale; the normed row is
    rounded to the norm's own dtype (x's) first, as the unfused pair would."""
    pdl_trigger(PDL)
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)  # a weight: no kernel writes it, so before the wait
    pdl_wait(PDL)
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0)
    if HAS_RES:
        r = tl.load(r_ptr + row * stride_r + cols, mask=mask, other=0.0)
        h = (x.to(tl.float32) + r.to(tl.float32)).to(x.dtype)  # rounded as a torch add would
        tl.store(h_ptr + row * N + cols, h, mask=mask)
    else:
        h = x
    hf = h.to(tl.float32)
    var = tl.sum(hf * hf, 0) / N
    normed = (hf * tl.rsqrt(var + eps)).to(x.dtype)
    out = w.to(tl.float32) * normed.to(tl.float32)
    if QUANT:
        out = out.to(x.dtype).to(tl.float32)
        amax = tl.maximum(tl.max(tl.abs(out), 0), MIN_AMAX)
        inv = tl.math.div_rn(tl.full([], 448.0, tl.float32), amax)
        tl.store(s_ptr + row, tl.math.div_rn(amax, tl.full([], 448.0, tl.float32)))
        out = round_e4m3(tl.minimum(tl.maximum(out * inv, -448.0), 448.0))
    tl.store(out_ptr + row * N + cols, out.to(out_ptr.dtype.element_ty), mask=mask)


def rmsnorm_triton(
    x: torch.Tensor, weight: torch.Tensor, eps: float, residual: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Triton: one program per row (row length up to a few 10k elements)."""
    out, h, _ = _launch(x, weight, eps, residual, quant=False)
    return out, h


def rmsnorm_quant_triton(
    x: torch.Tensor, weight: torch.Tensor, eps: float, residual: torch.Tensor | None = None
) -> tuple[tuple[torch.Tensor, torch.Tensor], torch.Tensor]:
    """Triton: the norm and the FP8 row quantization in one kernel; q is [rows, N], scale [rows, 1]."""
    q, h, scale = _launch(x, weight, eps, residual, quant=True)
    return (q, scale), h


def _launch(x: torch.Tensor, weight: torch.Tensor, eps: float, residual: torch.Tensor | None, quant: bool):
    require_triton()
    shape = x.shape
    N = shape[-1]
    x2 = x.reshape(-1, N)
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    rows = x2.shape[0]
    if quant:  # the quantized row is the norm's output rounded to x's dtype; that must be its own dtype too
        if torch.promote_types(weight.dtype, x.dtype) != x.dtype:
            raise ValueError(f"rmsnorm_quant: the norm weight ({weight.dtype}) must not be wider than x ({x.dtype})")
        out = torch.empty(rows, N, dtype=FP8, device=x.device)
        scale = torch.empty(rows, 1, dtype=torch.float32, device=x.device)  # every row's is written
    else:
        out = torch.empty(shape, dtype=torch.promote_types(weight.dtype, x.dtype), device=x.device)
        scale = out
    if residual is None:
        r2, h = x2, x
    else:
        r2 = residual.reshape(-1, N)
        if r2.stride(-1) != 1:
            r2 = r2.contiguous()
        h = torch.empty(shape, dtype=x.dtype, device=x.device)
    if rows == 0:
        return out, h, scale.fill_(FP8_MIN_AMAX / FP8_MAX) if quant else scale
    BLOCK = next_pow2(N)
    warps = 4 if BLOCK <= 2048 else 8 if BLOCK <= 8192 else 16
    _rmsnorm_kernel[(rows,)](
        x2, r2, weight, out, h, scale, x2.stride(0), r2.stride(0), eps,
        N=N, BLOCK=BLOCK, HAS_RES=residual is not None, QUANT=quant, MIN_AMAX=FP8_MIN_AMAX,
        num_warps=warps, **pdl_args(x2.device),
    )
    return out, h, scale
