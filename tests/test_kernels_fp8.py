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
@pytest.mark.parametrize("n,k,config", [(96, 256, (4, 1024, 4, 1)), (40, 300, (8, 512, 4, 3)), (64, 2048, None)])
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
