"""Batch-1 GEMV: Triton (interpreter on CPU) against its torch reference; the Linear hook."""

import pytest
import torch

from tachyon import kernels
from tachyon.kernels._triton import HAS_TRITON
from tachyon.kernels.gemv import CONFIGS, gemv_ref, gemv_triton, pick_gemv_config
from tachyon.models.layers import Linear, tune_gemv

needs_triton = pytest.mark.skipif(not HAS_TRITON, reason="triton not installed")


@needs_triton
@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("N,K,bias", [(24, 300, False), (7, 1024, True), (33, 96, True)])
def test_gemv_triton_matches_reference(config, N, K, bias):
    g = torch.Generator().manual_seed(N * K)
    x = torch.randn(1, K, generator=g)
    w = torch.randn(N, K, generator=g)
    b = torch.randn(N, generator=g) if bias else None
    out = gemv_triton(x, w, b, config)
    ref = gemv_ref(x, w, b)
    assert out.shape == (1, N) and not torch.isnan(out).any()
    assert torch.allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_linear_uses_reference_off_gpu_and_tuning_is_cuda_only():
    lin = Linear(16, 8, bias=True)
    torch.nn.init.normal_(lin.weight)
    torch.nn.init.normal_(lin.bias)
    x = torch.randn(1, 16)
    base = lin(x)
    lin.gemv_config = CONFIGS[0]  # on CPU the dispatcher still takes the reference
    assert torch.equal(lin(x), base)
    assert torch.equal(kernels.gemv(x, lin.weight, lin.bias, CONFIGS[0]), base)
    assert pick_gemv_config(lin.weight, lin.bias) is None  # not CUDA: keep cuBLAS/torch
    lin.gemv_config = None
    assert tune_gemv(torch.nn.Sequential(lin)) == {} and lin.gemv_config is None
