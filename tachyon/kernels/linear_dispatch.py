"""Dispatchers of the linear-layer kernels (batch-1 GEMVs, skinny GEMMs, W8A8 FP8 and the quantizing producers):
each sends CUDA tensors to its Triton kernel and anything else to its plain-torch reference (`use_triton`).
The package (`tachyon.kernels`) re-exports them; callers use them through it.
"""

import torch

from tachyon.kernels._triton import use_triton
from tachyon.kernels.activation import silu_and_mul_quant_ref, silu_and_mul_quant_triton
from tachyon.kernels.gemm_small import gemm_small_triton
from tachyon.kernels.gemv import (
    gemv_ref,
    gemv_triton,
    rmsnorm_gemv_ref,
    rmsnorm_gemv_triton,
    silu_gemv_ref,
    silu_gemv_triton,
)
from tachyon.kernels.gemv_glu import gemv_glu_ref, gemv_glu_triton
from tachyon.kernels.quant_fp8 import (
    QuantizedRows,
    fp8_gemm_small_triton,
    fp8_gemv_triton,
    fp8_linear_cuda,
    fp8_linear_ref,
    quantize_rows_ref,
    quantize_rows_triton,
)
from tachyon.kernels.rmsnorm import rmsnorm_quant_ref, rmsnorm_quant_triton


def gemv(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None,
         config: tuple[int, int, int, int] | None, out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """x [1, K] @ w^T (+ bias) in out_dtype (default x's): the Triton GEMV when `config` was picked for this
    weight (its fp32 accumulator rounded once, to out_dtype), else cuBLAS (in x's dtype, then converted)."""
    if config is not None and use_triton(x):
        return gemv_triton(x, w, bias, config, out_dtype=out_dtype)
    y = gemv_ref(x, w, bias)
    return y if out_dtype is None else y.to(out_dtype)


def gemm_small(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None,
               config: tuple[int, int, int, int, int, int] | None,
               out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """x [M <= 16, K] @ w^T (+ bias) in out_dtype (default x's): the Triton skinny GEMM when `config` was
    picked (rounded once, to out_dtype), else cuBLAS (in x's dtype, then converted)."""
    if config is not None and use_triton(x):
        return gemm_small_triton(x, w, bias, config, out_dtype=out_dtype)
    y = gemv_ref(x, w, bias)
    return y if out_dtype is None else y.to(out_dtype)


def rmsnorm_gemv(x: torch.Tensor, residual: torch.Tensor | None, norm_w: torch.Tensor, eps: float, w: torch.Tensor,
                 bias: torch.Tensor | None, config: tuple[int, int, int, int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Batch 1: (linear(rmsnorm(x + residual)), x + residual) in one Triton kernel on CUDA."""
    fn = rmsnorm_gemv_triton if use_triton(x) else rmsnorm_gemv_ref
    return fn(x, residual, norm_w, eps, w, bias, config)


def silu_gemv(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None,
              config: tuple[int, int, int, int]) -> torch.Tensor:
    """Batch 1: linear(silu(gate) * up) of a gate|up row in one Triton kernel on CUDA."""
    return (silu_gemv_triton if use_triton(x) else silu_gemv_ref)(x, w, bias, config)


def gemv_glu(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None,
             config: tuple[int, int, int, int]) -> torch.Tensor:
    """Batch 1: silu_and_mul(linear(x, w, bias)) of a stacked gate|up weight in one Triton kernel on CUDA."""
    return (gemv_glu_triton if use_triton(x) else gemv_glu_ref)(x, w, bias, config)


def quantize_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x [M, K] -> (float8_e4m3fn [M, K], fp32 per-row scale [M, 1]); quant_fp8.py."""
    return (quantize_rows_triton if use_triton(x) else quantize_rows_ref)(x)


def rmsnorm_quant(x: torch.Tensor, weight: torch.Tensor, eps: float, residual: torch.Tensor | None = None
                  ) -> tuple[tuple[torch.Tensor, torch.Tensor], torch.Tensor]:
    """((FP8 rows, fp32 scale [M, 1]), x + residual): rmsnorm then quantize_rows in one kernel (rmsnorm.py)."""
    return (rmsnorm_quant_triton if use_triton(x) else rmsnorm_quant_ref)(x, weight, eps, residual)


def silu_and_mul_quant(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(FP8 rows, fp32 scale [M, 1]) of silu_and_mul(x), quantized in the same kernel (activation.py)."""
    return (silu_and_mul_quant_triton if use_triton(x) else silu_and_mul_quant_ref)(x)


def fp8_linear(x: torch.Tensor | QuantizedRows, w_q: torch.Tensor, w_scale: torch.Tensor, bias: torch.Tensor | None,
               out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """W8A8 x @ (w_q * w_scale)^T + bias with x quantized per row, or given as its (q, scale) (quant_fp8.py)."""
    return (fp8_linear_cuda if use_triton(w_q) else fp8_linear_ref)(x, w_q, w_scale, bias, out_dtype)


def fp8_gemv(x: torch.Tensor | QuantizedRows, w_q: torch.Tensor, w_scale: torch.Tensor, bias: torch.Tensor | None,
             config: tuple | None, out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """Batch-1 W8A8 GEMV (quant_fp8.py): x [1, K] -> [1, N]; the reference is fp8_linear_ref."""
    if use_triton(w_q):
        return fp8_gemv_triton(x, w_q, w_scale, bias, config, out_dtype)
    return fp8_linear_ref(x, w_q, w_scale, bias, out_dtype)


def fp8_gemm_small(x: torch.Tensor | QuantizedRows, w_q: torch.Tensor, w_scale: torch.Tensor, bias: torch.Tensor | None,
                   config: tuple | None, out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """2..16-row W8A8 skinny GEMM (quant_fp8.py); the reference is fp8_linear_ref."""
    if use_triton(w_q):
        return fp8_gemm_small_triton(x, w_q, w_scale, bias, config, out_dtype)
    return fp8_linear_ref(x, w_q, w_scale, bias, out_dtype)
