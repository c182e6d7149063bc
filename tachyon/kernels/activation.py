"""SiLU-and-mul: x [..., 2I] -> silu(x[..., :I]) * x[..., I:] (gate first, then up), HF rounding.

silu_and_mul_quant(x [M, 2I]) -> (q [M, I] float8_e4m3fn, scale [M, 1] fp32): that result (in x's dtype)
quantized per row as quant_fp8.quantize_rows does (the input of an FP8 down projection), the row maxima taken
while the products are made; bit for bit quantize_rows(silu_and_mul(x)) of the same backend.
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
def _silu_and_mul_amax_kernel(x_ptr, y_ptr, part_ptr, stride_x, inter, nblk, BLOCK: tl.constexpr, PDL: tl.constexpr):
    """Grid (rows, column blocks): the block's products (stored in x's dtype) and their |max| (one fp32 per
    block, part_ptr [rows, nblk])."""
    pdl_trigger(PDL)
    pdl_wait(PDL)
    row = tl.program_id(0).to(tl.int64)
    blk = tl.program_id(1)
    cols = blk * BLOCK + tl.arange(0, BLOCK)
    mask = cols < inter
    y = _silu_mul(x_ptr + row * stride_x, cols, mask, inter)
    tl.store(y_ptr + row * inter + cols, y.to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(part_ptr + row * nblk + blk, tl.max(tl.abs(y), 0))


@triton.jit
def _quant_blocks_kernel(y_ptr, part_ptr, q_ptr, s_ptr, inter, nblk, BLOCK: tl.constexpr, NBLK: tl.constexpr,
                         MIN_AMAX: tl.constexpr, PDL: tl.constexpr):
    """Grid (rows, column blocks): the row's |max| from its blocks' partial maxima, then this block's scaled,
    clamped FP8 store (block 0 also stores the row's scale)."""
    pdl_trigger(PDL)
    pdl_wait(PDL)
    row = tl.program_id(0).to(tl.int64)
    blk = tl.program_id(1)
    b = tl.arange(0, NBLK)
    parts = tl.load(part_ptr + row * nblk + b, mask=b < nblk, other=0.0)
    amax = tl.maximum(tl.max(parts, 0), MIN_AMAX)
    inv = tl.math.div_rn(tl.full([], 448.0, tl.float32), amax)
    if blk == 0:
        tl.store(s_ptr + row, tl.math.div_rn(amax, tl.full([], 448.0, tl.float32)))
    cols = blk * BLOCK + tl.arange(0, BLOCK)
    mask = cols < inter
    y = tl.load(y_ptr + row * inter + cols, mask=mask, other=0.0).to(tl.float32)
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
    """Triton: two launches, both over (rows, 1,024-column blocks), so a single row still spreads over the SMs:
    the products with each block's |max|, then the quantization (the row's max from its blocks'). The
    products pass through a temporary in x's dtype."""
    require_triton()
    half = x.shape[-1] // 2
    x2 = x.reshape(-1, x.shape[-1])
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    rows = x2.shape[0]
    q = torch.empty(rows, half, dtype=FP8, device=x.device)
    if rows == 0 or half == 0:
        return q, torch.full((rows, 1), FP8_MIN_AMAX / FP8_MAX, dtype=torch.float32, device=x.device)
    scale = torch.empty(rows, 1, dtype=torch.float32, device=x.device)  # every row's is written
    BLOCK = 1024
    nblk = triton.cdiv(half, BLOCK)
    y = torch.empty(rows, half, dtype=x.dtype, device=x.device)
    parts = torch.empty(rows, nblk, dtype=torch.float32, device=x.device)
    pdl = pdl_args(x2.device)
    _silu_and_mul_amax_kernel[(rows, nblk)](x2, y, parts, x2.stride(0), half, nblk, BLOCK=BLOCK, **pdl)
    _quant_blocks_kernel[(rows, nblk)](y, parts, q, scale, half, nblk, BLOCK=BLOCK, NBLK=next_pow2(nblk),
                                       MIN_AMAX=FP8_MIN_AMAX, **pdl)
    return q, scale
