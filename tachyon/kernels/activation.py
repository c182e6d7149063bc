"""SiLU-and-mul: x [..., 2I] -> silu(x[..., :I]) * x[..., I:] (gate first, then up), HF rounding.

silu_and_mul_quant(x [M, 2I]) -> (q [M, I] float8_e4m3fn, scale [M, 1] fp32): that result (in x's dtype)
quantized per row as quant_fp8.quantize_rows does, in one kernel (the input of an FP8 down projection); bit for
bit quantize_rows(silu_and_mul(x)) of the same backend.
"""

import torch
import torch.nn.functional as F

from tachyon.kernels._triton import next_pow2, pdl_args, pdl_trigger, pdl_wait, require_triton, tl, triton
from tachyon.kernels.quant_fp8 import FP8, FP8_MAX, FP8_MIN_AMAX, quantize_rows_ref, round_e4m3


def silu_and_mul_ref(x: torch.Tensor) -> torch.Tensor:
    """Plain torch, as HF's MLP computes act_fn(gate) * up in the input dtype."""
    half = x.shape[-1] // 2
    return F.silu(x[..., :half]) * x[..., half:]


def silu_and_mul_quant_ref(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Plain torch: the reference activation, then the reference row quantization."""
    y = silu_and_mul_ref(x)
    return quantize_rows_ref(y.reshape(-1, y.shape[-1]))


@triton.jit
def _silu_mul(x_ptr, cols, mask, inter):
    """silu(gate) * up at `cols` of the row at x_ptr, in fp32 after rounding to x's dtype as torch does."""
    g = tl.load(x_ptr + cols, mask=mask, other=0.0)
    u = tl.load(x_ptr + inter + cols, mask=mask, other=0.0)
    gf = g.to(tl.float32)
    act = (gf / (1.0 + tl.exp(-gf))).to(g.dtype)
    return (act.to(tl.float32) * u.to(tl.float32)).to(g.dtype).to(tl.float32)


@triton.jit
def _silu_and_mul_quant_kernel(x_ptr, q_ptr, s_ptr, stride_x, inter, BLOCK: tl.constexpr, MIN_AMAX: tl.constexpr,
                               PDL: tl.constexpr):
    """One program per row, two passes over BLOCK-wide chunks: the row's |max| of the rounded products, then
    the scaled, clamped FP8 store (the second pass recomputes the products from the L2-resident row)."""
    pdl_trigger(PDL)
    pdl_wait(PDL)
    row = tl.program_id(0).to(tl.int64)
    base = x_ptr + row * stride_x
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for k0 in range(0, inter, BLOCK):
        cols = k0 + offs
        acc = tl.maximum(acc, tl.abs(_silu_mul(base, cols, cols < inter, inter)))
    amax = tl.maximum(tl.max(acc, 0), MIN_AMAX)
    inv = tl.math.div_rn(tl.full([], 448.0, tl.float32), amax)
    tl.store(s_ptr + row, tl.math.div_rn(amax, tl.full([], 448.0, tl.float32)))
    for k0 in range(0, inter, BLOCK):
        cols = k0 + offs
        mask = cols < inter
        y = _silu_mul(base, cols, mask, inter)
        q = round_e4m3(tl.minimum(tl.maximum(y * inv, -448.0), 448.0))
        tl.store(q_ptr + row * inter + cols, q.to(q_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _silu_and_mul_kernel(x_ptr, out_ptr, stride_x, inter, BLOCK: tl.constexpr, PDL: tl.constexpr):
    pdl_trigger(PDL)
    pdl_wait(PDL)
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < inter
    g = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0)
    u = tl.load(x_ptr + row * stride_x + inter + cols, mask=mask, other=0.0)
    gf = g.to(tl.float32)
    act = (gf / (1.0 + tl.exp(-gf))).to(g.dtype)  # silu, rounded to the input dtype like torch
    out = act.to(tl.float32) * u.to(tl.float32)
    tl.store(out_ptr + row * inter + cols, out.to(g.dtype), mask=mask)


def silu_and_mul_triton(x: torch.Tensor) -> torch.Tensor:
    """Triton: grid (rows, column blocks)."""
    require_triton()
    half = x.shape[-1] // 2
    x2 = x.reshape(-1, x.shape[-1])
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    out = torch.empty(*x.shape[:-1], half, dtype=x.dtype, device=x.device)
    rows = x2.shape[0]
    if rows == 0 or half == 0:
        return out
    BLOCK = 1024
    _silu_and_mul_kernel[(rows, triton.cdiv(half, BLOCK))](x2, out, x2.stride(0), half, BLOCK=BLOCK,
                                                           **pdl_args(x2.device))
    return out


def silu_and_mul_quant_triton(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Triton: one program per row of x [M, 2I], chunks of up to 4,096 columns."""
    require_triton()
    half = x.shape[-1] // 2
    x2 = x.reshape(-1, x.shape[-1])
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    rows = x2.shape[0]
    q = torch.empty(rows, half, dtype=FP8, device=x.device)
    scale = torch.full((rows, 1), FP8_MIN_AMAX / FP8_MAX, dtype=torch.float32, device=x.device)
    if rows == 0 or half == 0:
        return q, scale
    BLOCK = min(next_pow2(half), 4096)
    _silu_and_mul_quant_kernel[(rows,)](x2, q, scale, x2.stride(0), half, BLOCK=BLOCK, MIN_AMAX=FP8_MIN_AMAX,
                                        num_warps=4 if BLOCK <= 1024 else 8, **pdl_args(x2.device))
    return q, scale
