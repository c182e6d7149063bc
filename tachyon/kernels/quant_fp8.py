"""FP8 (e4m3) W8A8: per-output-channel weight scales, per-row dynamic activation scales.

Contract:
  quantize_rows(x [M, K] float) -> (q [M, K] float8_e4m3fn, scale [M, 1] fp32), x ~= q * scale, with
    amax = max(max |x_row|, FP8_MIN_AMAX) (fp32), scale = amax / 448 and q = clamp(x * (448 / amax), +-448)
    rounded to nearest even; both divisions round to nearest, so the kernel and the reference agree bit
    for bit. A row of zeros gives q = 0.
  quantize_weight(w [N, K]) -> (q [N, K] float8_e4m3fn, scale [N] fp32): the same rule per output channel
    (load time only; plain torch).
  fp8_linear(x [M, K], w_q [N, K], w_scale [N], bias [N] | None) -> [M, N] in out_dtype (default x's):
    (q_x * s_x) @ (w_q * s_w)^T + bias, accumulated in fp32. CUDA: cuBLASLt through torch._scaled_mm with
    row-wise scales; otherwise the dequantizing reference (the oracle; slow: it materializes the weight).
  fp8_gemv(x [1, K], ...) / fp8_gemm_small(x [2..16, K], ...): the same through gemv.py's batch-1 GEMV and
    gemm_small.py's skinny GEMM reading the FP8 weight, where warm-up tuning finds them faster than cuBLASLt.
  Each linear takes x either unquantized or as its quantize_rows pair (q, scale) (a fused producer such as
  rmsnorm_quant made it); with a pair, out_dtype is required.
"""

from __future__ import annotations

import os

import torch

from tachyon.kernels._triton import next_pow2, pdl_args, pdl_trigger, pdl_wait, require_triton, tl, triton
from tachyon.kernels.gemv import CONFIGS as GEMV_CONFIGS

# skinny-GEMM (gemm_small.py SmallConfig) candidates for FP8 weights at 2..8 rows. The 16-row layout (SWAP 0: mma
# with fp32 accumulation) matched cuBLASLt's exact result; the swapped one (SWAP 1: Hopper's warpgroup MMA,
# whose FP8 accumulation is not exact: relative error 1.3-4.1e-3 against 7e-4) is a candidate only under
# fast accumulation (fast_accum(), the default). Times on the H200 at 8 rows (session 11, us; cuBLASLt exact
# 60.2 / 51.6 / 15.5): Qwen2.5-7B gate_up 42.5 / down 40.2 / qkv 12.5 with (0, 32, 256, 4, 4, 1); swapped
# 41.8 / 26.5 / 9.0.
FP8_SMALL_CONFIGS = ((0, 32, 256, 4, 4, 1), (0, 32, 512, 4, 4, 1), (0, 64, 256, 4, 4, 1), (0, 16, 512, 4, 3, 1))
FP8_SMALL_FAST_CONFIGS = ((1, 64, 128, 4, 4, 1), (1, 64, 128, 4, 4, 4), (1, 128, 128, 4, 4, 1), (1, 64, 256, 4, 3, 2))

# batch-1 GEMV (gemv.py GemvConfig) candidates for FP8 weights: gemv.CONFIGS and three more that won in the FP8
# sweep on the H200 (session 12, gemv_sweep.py --fp8 --grid, 56 configs, input pre-quantized; us against the FP8
# byte floor): Qwen2.5-7B gate_up (16, 512, 4, 3) 34.5 / 32.0, qkv (4, 2048, 4, 1) 6.4 / 3.9 (the best, (2, 2048,
# 4, 1), is in CONFIGS); Qwen3-0.6B's down chose (2, 4096, 4, 1) at warm-up
FP8_GEMV_CONFIGS = GEMV_CONFIGS + ((16, 512, 4, 3), (4, 2048, 4, 1), (2, 4096, 4, 1))

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0
FP8_MIN_AMAX = 1e-12


def quantize_rows_ref(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Plain torch, the contract's arithmetic."""
    xf = x.float()
    amax = xf.abs().amax(dim=-1, keepdim=True).clamp(min=FP8_MIN_AMAX)
    # tensor / tensor: a correctly rounded division (a Python scalar on either side may become a multiply by
    # a rounded reciprocal)
    fp8_max = torch.full_like(amax, FP8_MAX)
    q = (xf * (fp8_max / amax)).clamp(-FP8_MAX, FP8_MAX).to(FP8)
    return q, amax / fp8_max


@triton.jit
def round_e4m3(v):
    """fp32 in [-448, 448] -> the nearest e4m3 value (ties to even), still fp32, so the fp8 cast after it is
    exact: normals keep 3 mantissa bits (integer rounding of the bit pattern), values under 2^-6 snap to
    multiples of 2^-9 (adding and removing 1.5 * 2^14, whose fp32 ulp is 2^-9; the sign kept, -0 included).
    The cast alone would do the same on the GPU; Triton's interpreter rounds some values below a power of
    two down a binade."""
    bits = v.to(tl.int32, bitcast=True)
    normal = ((bits + 0x7FFFF + ((bits >> 20) & 1)) & -0x100000).to(tl.float32, bitcast=True)
    a = tl.abs(v)
    small = ((a + 24576.0) - 24576.0).to(tl.int32, bitcast=True) | (bits & -0x80000000)  # v's sign bit
    return tl.where(a < 0.015625, small.to(tl.float32, bitcast=True), normal)


def cast_to_cache_ref(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """x in a KV cache's dtype: a plain cast, or for an e4m3 cache (kv_cache_dtype="fp8", scale 1) saturated
    to +-448 and rounded to nearest even (torch's cast alone turns values past 448 into NaN)."""
    if dtype == FP8:
        return x.float().clamp(-FP8_MAX, FP8_MAX).to(FP8)
    return x.to(dtype)


@triton.jit
def cast_to_cache(x, ty: tl.constexpr):
    """Triton twin of cast_to_cache_ref (bit for bit): `ty` is the cache's element type."""
    if ty == tl.float8e4nv:
        return round_e4m3(tl.minimum(tl.maximum(x.to(tl.float32), -448.0), 448.0)).to(ty)
    else:
        return x.to(ty)


@triton.jit
def to_dot_dtype(q, cache_ty: tl.constexpr):
    """A query tile in the dtype attention's dots take over a cache of `cache_ty`: over an e4m3 cache, 16-bit
    queries become fp16 (e4m3 widens to fp16 in one instruction per pair; fp16 holds a bf16 query's values
    exactly from 6e-5 to 65,504, and larger ones are clamped there rather than becoming inf), fp32 ones stay;
    over any other cache the query keeps its dtype. The cached K / V tiles are then widened to the query's
    dtype."""
    if (cache_ty == tl.float8e4nv) and (q.dtype != tl.float32):
        return tl.minimum(tl.maximum(q.to(tl.float32), -65504.0), 65504.0).to(tl.float16)
    else:
        return q


@triton.jit
def widen_cache_tile(x, dot_ty: tl.constexpr, WIDEN: tl.constexpr):
    """A K or V tile as loaded from the cache, in the dots' dtype `dot_ty` (to_dot_dtype's). WIDEN 0: a plain cast
    (over an e4m3 cache the dots are fp16 and the cast is one cvt per pair, exact). WIDEN 1 / 2 (an e4m3 cache only):
    the value / 256, exactly, by placing e4m3's bits in fp16's: the sign at bit 15, exponent and mantissa at bits
    13..7, so fp16's exponent bias (15) against e4m3's (7) is the factor 2^-8, subnormals included (0x7F, e4m3's NaN,
    which a saturating cache never holds, reads 1.875). 1: integer ops (any backend, the interpreter's); 2: one
    PTX sequence per four values (compiled code only). Callers scale their scores and probabilities by 256."""
    if WIDEN == 0:
        return x.to(dot_ty)
    elif WIDEN == 1:
        b = x.to(tl.uint8, bitcast=True).to(tl.uint16)
        h = ((b & 0x80) << 8) | ((b & 0x7F) << 7)
        return h.to(tl.float16, bitcast=True).to(dot_ty)
    else:
        # four e4m3 bytes in, two fp16 pairs out: each byte into the high byte of a 16-bit half (prmt), then the
        # sign kept and the 7 bits below it moved down one (and, shr, lop3 (a & c) | b = 0xea)
        h = tl.inline_asm_elementwise(
            "{\n.reg .b32 a<2>, b<2>;\n"
            "prmt.b32 a0, 0, $2, 0x5140;\nprmt.b32 a1, 0, $2, 0x7362;\n"
            "and.b32 b0, a0, 0x7f007f00;\nand.b32 b1, a1, 0x7f007f00;\n"
            "shr.b32 b0, b0, 1;\nshr.b32 b1, b1, 1;\n"
            "lop3.b32 $0, a0, 0x80008000, b0, 0xea;\nlop3.b32 $1, a1, 0x80008000, b1, 0xea;\n}",
            "=r,=r,r", [x.to(tl.uint8, bitcast=True)], dtype=tl.float16, is_pure=True, pack=4)
        return h.to(dot_ty)


@triton.jit
def widened_scale(x, WIDEN: tl.constexpr):
    """x (a softmax scale, or probabilities) for the dots with K / V tiles that widen_cache_tile made: x * 256
    where WIDEN's tiles hold values / 256, else x itself."""
    if WIDEN == 0:
        return x
    else:
        return x * 256.0


@triton.jit
def _quant_rows_kernel(x_ptr, q_ptr, s_ptr, stride_x, stride_q, K: tl.constexpr, BLOCK: tl.constexpr,
                       MIN_AMAX: tl.constexpr, PDL: tl.constexpr):
    """One program per row: the row's |max| over BLOCK-wide chunks, then the scaled, clamped store (the
    second pass re-reads the row from L2)."""
    pdl_trigger(PDL)
    pdl_wait(PDL)
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for k0 in range(0, K, BLOCK):
        x = tl.load(x_ptr + row * stride_x + k0 + cols, mask=k0 + cols < K, other=0.0).to(tl.float32)
        acc = tl.maximum(acc, tl.abs(x))
    amax = tl.maximum(tl.max(acc, 0), MIN_AMAX)
    inv = tl.math.div_rn(tl.full([], 448.0, tl.float32), amax)
    tl.store(s_ptr + row, tl.math.div_rn(amax, tl.full([], 448.0, tl.float32)))
    for k0 in range(0, K, BLOCK):
        mask = k0 + cols < K
        x = tl.load(x_ptr + row * stride_x + k0 + cols, mask=mask, other=0.0).to(tl.float32)
        q = round_e4m3(tl.minimum(tl.maximum(x * inv, -448.0), 448.0))
        tl.store(q_ptr + row * stride_q + k0 + cols, q.to(q_ptr.dtype.element_ty), mask=mask)


def quantize_rows_triton(x: torch.Tensor, out: tuple[torch.Tensor, torch.Tensor] | None = None
                         ) -> tuple[torch.Tensor, torch.Tensor]:
    """Triton: one program per row, chunks of up to 4,096 columns. `out`: (q, scale) buffers to write
    (contiguous, the result's shapes and dtypes); new ones otherwise."""
    require_triton()
    M, K = x.shape
    if x.stride(-1) != 1:
        x = x.contiguous()
    if out is None:
        q = torch.empty(M, K, dtype=FP8, device=x.device)
        scale = torch.empty(M, 1, dtype=torch.float32, device=x.device)
    else:
        q, scale = out
    if M == 0 or K == 0:
        return q, scale.fill_(FP8_MIN_AMAX / FP8_MAX)
    BLOCK = min(next_pow2(K), 4096)
    _quant_rows_kernel[(M,)](x, q, scale, x.stride(0), q.stride(0), K=K, BLOCK=BLOCK, MIN_AMAX=FP8_MIN_AMAX,
                             num_warps=4 if BLOCK <= 1024 else 8, **pdl_args(x.device))
    return q, scale


def quantize_weight(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[N, K] weight -> (fp8 [N, K], fp32 scale [N]); rows are done in slices to bound the fp32 copy."""
    q = torch.empty(w.shape, dtype=FP8, device=w.device)
    scale = torch.empty(w.shape[0], dtype=torch.float32, device=w.device)
    step = max(1, (64 << 20) // max(1, 4 * w.shape[1]))
    for r0 in range(0, w.shape[0], step):
        q[r0: r0 + step], s = quantize_rows_ref(w[r0: r0 + step])
        scale[r0: r0 + step] = s.squeeze(1)
    return q, scale


QuantizedRows = tuple[torch.Tensor, torch.Tensor]  # (float8_e4m3fn [M, K], fp32 scale [M, 1]): quantize_rows'


def _operand(x: torch.Tensor | QuantizedRows, out_dtype: torch.dtype | None, quantize
             ) -> tuple[torch.Tensor, torch.Tensor, torch.dtype]:
    """(q, scale, out dtype) of a linear's input given as a tensor (quantized here by `quantize`) or a pair."""
    if isinstance(x, tuple):
        if out_dtype is None:
            raise ValueError("out_dtype is required when x comes already quantized")
        return x[0], x[1], out_dtype
    xq, xs = quantize(x)
    return xq, xs, out_dtype or x.dtype


def fp8_linear_ref(x: torch.Tensor | QuantizedRows, w_q: torch.Tensor, w_scale: torch.Tensor,
                   bias: torch.Tensor | None, out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """The dequantizing oracle, for every row count (the FP8 GEMV and skinny GEMM included): fp32 products of
    the dequantized operands."""
    xq, xs, out_dtype = _operand(x, out_dtype, quantize_rows_ref)
    y = (xq.float() * xs) @ (w_q.float() * w_scale.float()[:, None]).t()
    if bias is not None:
        y = y + bias.float()
    return y.to(out_dtype)


def fast_accum() -> bool:
    """Hopper's fast FP8 accumulation: cuBLASLt's (use_fast_accum) and the skinny GEMM's swapped layout among
    the tuning candidates. On by default, as vLLM's FP8 GEMMs on Hopper: its error (1.3-4.1e-3 relative at
    the 7B projections, 8 rows) is an order below W8A8's own; on Qwen2.5-7B (H200, session 11) it gave
    nano256 14,692 -> 15,798 tok/s and seed8 1,859 -> 2,596. TACHYON_FP8_FAST_ACCUM=0: exact accumulation.
    Read per call (a CUDA graph keeps what was in force at capture)."""
    return os.environ.get("TACHYON_FP8_FAST_ACCUM", "1") != "0"


def fp8_linear_cuda(x: torch.Tensor | QuantizedRows, w_q: torch.Tensor, w_scale: torch.Tensor,
                    bias: torch.Tensor | None, out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """CUDA (compute capability >= 8.9): the Triton row quantization, then cuBLASLt's FP8 GEMM with row-wise
    scales (`w_scale` as [1, N]); `bias` must be in out_dtype (bf16)."""
    xq, xs, out_dtype = _operand(x, out_dtype, quantize_rows_triton)
    b = None if bias is None else bias.to(out_dtype)
    return torch._scaled_mm(xq, w_q.t(), scale_a=xs, scale_b=w_scale.view(1, -1), bias=b, out_dtype=out_dtype,
                            use_fast_accum=fast_accum())


def fp8_gemv_triton(x: torch.Tensor | QuantizedRows, w_q: torch.Tensor, w_scale: torch.Tensor,
                    bias: torch.Tensor | None, config: tuple | None = None, out_dtype: torch.dtype | None = None
                    ) -> torch.Tensor:
    """Batch 1, x [1, K] row-contiguous: the row quantization, then gemv.py's GEMV streaming the FP8 weight
    (half the bf16 bytes) with the two scales applied to its fp32 dot products; `config` a gemv.GemvConfig."""
    from tachyon.kernels.gemv import _launch

    xq, xs, out_dtype = _operand(x, out_dtype, quantize_rows_triton)
    assert xq.dim() == 2 and xq.shape[0] == 1 and xq.stride(-1) == 1 and w_q.stride(-1) == 1
    return _launch(xq, w_q, bias, config, out_dtype=out_dtype, x_scale=xs, w_scale=w_scale)


def fp8_gemm_small_triton(x: torch.Tensor | QuantizedRows, w_q: torch.Tensor, w_scale: torch.Tensor,
                          bias: torch.Tensor | None, config: tuple | None = None,
                          out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """2..16 rows, x [M, K] with unit column stride: the row quantization, then gemm_small.py's skinny GEMM on the
    FP8 operands (given to the tensor cores as they are) with both scales on its fp32 accumulator; `config`
    a gemm_small.SmallConfig."""
    from tachyon.kernels.gemm_small import gemm_small_triton

    xq, xs, out_dtype = _operand(x, out_dtype, quantize_rows_triton)
    return gemm_small_triton(xq, w_q, bias, config, out_dtype=out_dtype, x_scale=xs, w_scale=w_scale)


__all__ = ["FP8", "FP8_GEMV_CONFIGS", "FP8_MAX", "FP8_SMALL_CONFIGS", "FP8_SMALL_FAST_CONFIGS", "QuantizedRows",
           "cast_to_cache", "cast_to_cache_ref", "fast_accum", "fp8_gemm_small_triton", "fp8_gemv_triton",
           "fp8_linear_cuda", "fp8_linear_ref", "quantize_rows_ref", "quantize_rows_triton", "quantize_weight",
           "round_e4m3", "to_dot_dtype", "widen_cache_tile", "widened_scale"]
