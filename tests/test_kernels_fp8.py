"""FP8 W8A8 (kernels/quant_fp8.py): the Triton row quantization against its torch reference bit for bit, the
cuBLASLt (torch._scaled_mm) linear against the dequantizing reference, and both against the unquantized linear."""

import pytest
import torch
import torch.nn.functional as F

from tests.kernel_env import CUDA, DEV, DTYPES, K, needs_triton

FP8 = torch.float8_e4m3fn


def _bits(q: torch.Tensor) -> torch.Tensor:
    return q.view(torch.uint8)


def _poisoned(m: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    q = torch.full((m, k), 0x7F, dtype=torch.uint8, device=DEV).view(FP8)  # 0x7F: e4m3fn NaN
    return q, torch.full((m, 1), float("nan"), device=DEV)


def _every_e4m3_value_and_midpoint() -> torch.Tensor:
    vals = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(FP8).float()
    vals = vals[torch.isfinite(vals)].sort().values
    mids = (vals[1:] + vals[:-1]) / 2
    x = torch.cat([vals, mids, mids + 1e-6, mids - 1e-6, torch.tensor([-0.0, 448.0, -448.0])]).clamp(-448, 448)
    return x.view(1, -1)


@needs_triton
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,k", [(1, 64), (7, 300), (3, 5000), (33, 1024)])
def test_quantize_rows_matches_reference(dtype, m, k):
    g = torch.Generator().manual_seed(m * k)
    x = (torch.randn(m, k, generator=g) * 3).to(dtype).to(DEV)
    x[0, ::3] *= 1e-4  # values that land in e4m3's subnormal range
    if m > 2:
        x[1] = 0.0  # all-zero row: q = 0, the floor scale
        x[2, 5] = -50.0  # one outlier sets the row's scale
    out = _poisoned(m, k)
    q, s = K.quantize_rows_triton(x, out=out)
    assert q.data_ptr() == out[0].data_ptr() and s.data_ptr() == out[1].data_ptr()
    q_ref, s_ref = K.quantize_rows_ref(x)
    assert not torch.isnan(q.float()).any() and not torch.isnan(s).any(), "unwritten elements"
    assert torch.equal(_bits(q), _bits(q_ref))
    assert torch.equal(s, s_ref)
    # the contract's accuracy: each value within half an e4m3 step (1/16 relative) or one subnormal step
    deq = q.float() * s
    err = (deq - x.float()).abs()
    assert bool((err <= x.float().abs() / 16 + s * 2.0 ** -10 + 1e-30).all())


@needs_triton
def test_quantize_rows_exact_on_the_e4m3_grid():
    """Every finite e4m3 value, the midpoints between neighbours (ties to even) and values just off them."""
    x = _every_e4m3_value_and_midpoint().to(DEV)
    q, s = K.quantize_rows_triton(x)
    q_ref, _ = K.quantize_rows_ref(x)
    assert float(s) == 1.0  # amax 448
    assert torch.equal(_bits(q), _bits(q_ref))
    grid = x[0, :253]  # the representable values themselves come back unchanged (the 254th is 448 again)
    assert torch.equal(q[0, :253].float(), grid)


def test_quantize_weight_is_per_output_channel():
    g = torch.Generator().manual_seed(1)
    w = torch.randn(96, 80, generator=g) * torch.logspace(-3, 1, 96)[:, None]  # channels of very different size
    q, s = K.quantize_weight(w)
    assert q.dtype == FP8 and s.shape == (96,)
    for r in (0, 50, 95):
        q_r, s_r = K.quantize_rows_ref(w[r: r + 1])
        assert torch.equal(_bits(q[r: r + 1]), _bits(q_r)) and float(s[r]) == float(s_r)
    rel = ((q.float() * s[:, None] - w).norm(dim=1) / w.norm(dim=1)).max()
    assert float(rel) < 0.04


def _scaled_mm_available() -> bool:
    try:
        a = torch.zeros(16, 16, device=DEV).to(FP8)
        torch._scaled_mm(a, a.t(), scale_a=torch.ones(16, 1, device=DEV), scale_b=torch.ones(1, 16, device=DEV),
                         out_dtype=torch.bfloat16)
        return True
    except (RuntimeError, NotImplementedError, AttributeError):
        return False


@needs_triton
@pytest.mark.skipif(not _scaled_mm_available(), reason="torch._scaled_mm with row-wise scales is not available here")
@pytest.mark.parametrize("dtype", [torch.bfloat16] + ([torch.float32] if not CUDA else []))
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("m", [1, 5, 64])
def test_fp8_linear_matches_dequantized_reference(dtype, bias, m):
    g = torch.Generator().manual_seed(m + 7 * bias)
    n, k = 96, 256
    x = torch.randn(m, k, generator=g).to(dtype).to(DEV)
    w = torch.randn(n, k, generator=g).to(DEV)
    b = (torch.randn(n, generator=g).to(dtype).to(DEV)) if bias else None
    w_q, w_s = K.quantize_weight(w)
    y = K.fp8_linear_cuda(x, w_q, w_s, b)
    y_ref = K.fp8_linear_ref(x, w_q, w_s, b)
    assert y.dtype == dtype and y.shape == (m, n) and not torch.isnan(y).any()
    scale = float(y_ref.float().abs().max())
    tol = 1e-4 if dtype == torch.float32 else 1e-2
    assert float((y.float() - y_ref.float()).abs().max()) <= tol * scale
    # and against the unquantized linear (an independent oracle): W8A8 error of a few percent at most
    y_full = F.linear(x.float(), w.float(), None if b is None else b.float())
    rel = float((y_ref.float() - y_full).norm() / y_full.norm())
    assert rel < 0.06


def test_fp8_linear_reference_dispatch_on_cpu():
    """The dispatcher takes the reference for CPU tensors (what the CPU engine runs)."""
    x = torch.randn(3, 32)
    w_q, w_s = K.quantize_weight(torch.randn(16, 32))
    assert torch.equal(K.fp8_linear(x, w_q, w_s, None), K.fp8_linear_ref(x, w_q, w_s, None))


@needs_triton
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("n,k,config", [(96, 256, (4, 1024, 4, 1)), (40, 300, (8, 512, 4, 3)), (64, 2048, None),
                                        (24, 300, (2, 4096, 4, 1)), (40, 2200, (16, 512, 4, 3))])
def test_fp8_gemv_matches_reference(bias, n, k, config):
    """Batch 1: the GEMV kernel streaming the FP8 weight (with and without an even K, several configs)."""
    g = torch.Generator().manual_seed(n + k)
    dtype = torch.bfloat16 if CUDA else torch.float32
    x = torch.randn(1, k, generator=g).to(dtype).to(DEV)
    w_q, w_s = K.quantize_weight(torch.randn(n, k, generator=g).to(DEV))
    b = torch.randn(n, generator=g).to(dtype).to(DEV) if bias else None
    y = K.fp8_gemv_triton(x, w_q, w_s, b, config)
    y_ref = K.fp8_linear_ref(x, w_q, w_s, b)
    assert y.dtype == dtype and y.shape == (1, n) and not torch.isnan(y).any()
    scale = float(y_ref.float().abs().max())
    tol = 1e-4 if dtype == torch.float32 else 1e-2
    assert float((y.float() - y_ref.float()).abs().max()) <= tol * scale


@needs_triton
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("config", K.quant_fp8.FP8_SMALL_CONFIGS + K.quant_fp8.FP8_SMALL_FAST_CONFIGS)
@pytest.mark.parametrize("m,n,k", [(2, 96, 256), (8, 80, 512), (5, 64, 300)])
def test_fp8_gemm_small_matches_reference(bias, config, m, n, k):
    """2..16 rows: both skinny-GEMM layouts (and split-K) on FP8 operands, ragged K included."""
    g = torch.Generator().manual_seed(m * n + k)
    dtype = torch.bfloat16 if CUDA else torch.float32
    x = torch.randn(m, k, generator=g).to(dtype).to(DEV)
    w_q, w_s = K.quantize_weight(torch.randn(n, k, generator=g).to(DEV))
    b = torch.randn(n, generator=g).to(dtype).to(DEV) if bias else None
    y = K.fp8_gemm_small_triton(x, w_q, w_s, b, config)
    y_ref = K.fp8_linear_ref(x, w_q, w_s, b)
    assert y.dtype == dtype and y.shape == (m, n) and not torch.isnan(y).any()
    scale = float(y_ref.float().abs().max())
    tol = 1e-4 if dtype == torch.float32 else 1e-2
    assert float((y.float() - y_ref.float()).abs().max()) <= tol * scale


def _dequant_close(q: torch.Tensor, s: torch.Tensor, y: torch.Tensor) -> None:
    """(q, s) dequantizes to y within the contract's rounding (half an e4m3 step, or a subnormal step)."""
    err = (q.float() * s - y.float()).abs()
    assert bool((err <= y.float().abs() / 16 + s * 2.0 ** -9 + 1e-30).all())


@needs_triton
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])  # bf16 on CPU too: the rounding before the amax
@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize("m,n", [(1, 64), (5, 300), (3, 1024)])
def test_rmsnorm_quant_is_rmsnorm_then_quantize_rows(dtype, residual, m, n):
    """The fused norm + FP8 row quantization gives, bit for bit, the Triton norm's output quantized by the
    reference quantizer (the pair it replaces), and the same residual stream; within rounding of the torch
    reference pair."""
    g = torch.Generator().manual_seed(m * n + residual)
    x = (torch.randn(m, n, generator=g) * 2).to(dtype).to(DEV)
    r = torch.randn(m, n, generator=g).to(dtype).to(DEV) if residual else None
    w = (torch.rand(n, generator=g) + 0.5).to(dtype).to(DEV)
    if m > 2:
        x[1, 7] = 80.0  # an outlier sets that row's scale
    (q, s), h = K.rmsnorm_quant_triton(x, w, 1e-6, r)
    out, h_pair = K.rmsnorm_triton(x, w, 1e-6, r)
    q_pair, s_pair = K.quantize_rows_ref(out)
    assert q.shape == (m, n) and s.shape == (m, 1) and q.dtype == FP8
    assert torch.equal(_bits(q), _bits(q_pair)) and torch.equal(s, s_pair)
    assert torch.equal(h, h_pair)
    (q_ref, s_ref), h_ref = K.rmsnorm_quant_ref(x, w, 1e-6, r)
    torch.testing.assert_close(s, s_ref, rtol=2 ** -6 if dtype == torch.bfloat16 else 1e-5, atol=0)  # 2 bf16 ulps
    torch.testing.assert_close(h.float(), h_ref.float(), rtol=2 ** -7 if dtype == torch.bfloat16 else 0, atol=0)
    _dequant_close(q, s, out)


@needs_triton
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("m,inter", [(1, 96), (4, 300), (2, 5000)])
def test_silu_and_mul_quant_is_silu_and_mul_then_quantize_rows(dtype, m, inter):
    """The fused SiLU-and-mul + FP8 row quantization (several column chunks when inter > 4,096) equals the
    Triton activation quantized by the reference quantizer bit for bit, and the torch pair within rounding."""
    g = torch.Generator().manual_seed(m + inter)
    x = (torch.randn(m, 2 * inter, generator=g) * 3).to(dtype).to(DEV)
    x[0, inter + 3] = 0.0  # a product of exactly zero
    q, s = K.silu_and_mul_quant_triton(x)
    y = K.silu_and_mul_triton(x)
    q_pair, s_pair = K.quantize_rows_ref(y)
    assert q.shape == (m, inter) and s.shape == (m, 1) and q.dtype == FP8
    assert torch.equal(_bits(q), _bits(q_pair)) and torch.equal(s, s_pair)
    q_ref, s_ref = K.silu_and_mul_quant_ref(x)
    torch.testing.assert_close(s, s_ref, rtol=2 ** -6 if dtype == torch.bfloat16 else 1e-5, atol=0)  # 2 bf16 ulps
    _dequant_close(q, s, y)


def test_fused_quant_references_compose_the_pair():
    """The references are the unfused pair (what the CPU engine runs), and the zero row keeps the floor scale."""
    x, w = torch.randn(3, 40), torch.rand(40) + 0.5
    x[2] = 0.0
    (q, s), h = K.rmsnorm_quant(x, w, 1e-6)
    q2, s2 = K.quantize_rows_ref(K.rmsnorm_ref(x, w, 1e-6)[0])
    assert torch.equal(_bits(q), _bits(q2)) and torch.equal(s, s2) and h is x
    assert float(s[2]) == pytest.approx(K.quant_fp8.FP8_MIN_AMAX / 448.0) and not q[2].float().any()
    gu = torch.randn(2, 64)
    q, s = K.silu_and_mul_quant(gu)
    q2, s2 = K.quantize_rows_ref(K.silu_and_mul_ref(gu))
    assert torch.equal(_bits(q), _bits(q2)) and torch.equal(s, s2)


def test_fp8_linear_takes_a_quantized_pair():
    """A pre-quantized (q, scale) input gives the same result as the unquantized input; out_dtype is required
    with a pair."""
    x = torch.randn(4, 32)
    w_q, w_s = K.quantize_weight(torch.randn(16, 32))
    pair = K.quantize_rows(x)
    for fn in (K.fp8_linear_ref, K.fp8_linear):
        assert torch.equal(fn(pair, w_q, w_s, None, torch.float32), fn(x, w_q, w_s, None))
        with pytest.raises(ValueError, match="out_dtype"):
            fn(pair, w_q, w_s, None)


def test_linear_routes_a_quantized_input_only_to_an_fp8_layer():
    """models.layers: norm_linear / silu_linear feed an FP8 layer the fused producers' pairs and get what the
    unfused path gives; a bf16 layer refuses a pair."""
    from tachyon.models.layers import Linear, RMSNorm, norm_linear, silu_linear

    torch.manual_seed(0)
    lin, down, norm = Linear(32, 16), Linear(24, 32), RMSNorm(32, 1e-6)
    for m in (lin, down):  # Linear allocates its weight uninitialized (the loader fills it)
        m.weight.data.normal_(0.0, 0.1)
    norm.weight.data.uniform_(0.5, 1.5)
    x, res, gu = torch.randn(3, 32), torch.randn(3, 32), torch.randn(3, 48)
    with pytest.raises(TypeError, match="FP8"):
        lin(K.quantize_rows(x), out_dtype=torch.float32)
    lin.quantize_fp8()
    down.quantize_fp8()
    y, h = norm_linear(norm, lin, x, res)
    h_ref = x + res
    assert torch.equal(h, h_ref) and torch.equal(y, lin(norm(h_ref)))
    assert torch.equal(silu_linear(down, gu), down(K.silu_and_mul_ref(gu)))
