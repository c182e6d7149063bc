"""SiLU-and-mul: x [..., 2I] -> silu(x[..., :I]) * x[..., I:] (gate first, then up), HF rounding."""

import torch
import torch.nn.functional as F

from tachyon.kernels._triton import pdl_args, pdl_trigger, pdl_wait, require_triton, tl, triton


def silu_and_mul_ref(x: torch.Tensor) -> torch.Tensor:
    """Plain torch, as HF's MLP computes act_fn(gate) * up in the input dtype."""
    half = x.shape[-1] // 2
    return F.silu(x[..., :half]) * x[..., half:]


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
