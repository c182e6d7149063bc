"""Skinny GEMM (M <= 8): Triton (interpreter on CPU) against its torch reference; the Linear hook."""

import pytest
import torch

from tachyon import kernels
from tachyon.kernels._triton import HAS_TRITON
from tachyon.kernels.gemv import CONFIGS, MAX_M, gemv_ref, gemv_triton, pick_gemv_config
from tachyon.models.layers import Linear, tune_gemv

needs_triton = pytest.mark.skipif(not HAS_TRITON, reason="triton not installed")
ALL_CONFIGS = [c for cs in CONFIGS.values() for c in cs]


@needs_triton
@pytest.mark.parametrize("config", ALL_CONFIGS, ids=str)
@pytest.mark.parametrize("M,N,K,bias", [(1, 24, 300, False), (1, 7, 1024, True), (3, 33, 96, True),
                                        (8, 40, 512, False)])
def test_gemv_triton_matches_reference(config, M, N, K, bias):
    if M > config[0]:
        pytest.skip("config's BLOCK_M is smaller than M")
    g = torch.Generator().manual_seed(N * K + M)
    x_full = torch.randn(M, K + 5, generator=g)
    x = x_full[:, :K]  # a row stride != K must be honoured
    w = torch.randn(N, K, generator=g)
    b = torch.randn(N, generator=g) if bias else None
    out = gemv_triton(x, w, b, config)
    ref = gemv_ref(x, w, b)
    assert out.shape == (M, N) and not torch.isnan(out).any()
    assert torch.allclose(out, ref, rtol=1e-4, atol=1e-4)


@needs_triton
def test_gemv_triton_bf16():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 256, generator=g).bfloat16()
    w = torch.randn(48, 256, generator=g).bfloat16()
    out = gemv_triton(x, w, None, CONFIGS[MAX_M][0]).float()
    ref = gemv_ref(x.float(), w.float())
    assert out.dtype == torch.float32 and ((out - ref).norm() / ref.norm()).item() <= 1e-2


def test_linear_uses_reference_off_gpu_and_tuning_is_cuda_only():
    lin = Linear(16, 8, bias=True)
    torch.nn.init.normal_(lin.weight)
    torch.nn.init.normal_(lin.bias)
    x = torch.randn(1, 16)
    base = lin(x)
    lin.gemv_configs = {1: CONFIGS[1][0]}  # on CPU the dispatcher still takes the reference
    assert torch.equal(lin(x), base)
    assert torch.equal(kernels.gemv(x, lin.weight, lin.bias, CONFIGS[1][0]), base)
    assert pick_gemv_config(lin.weight, lin.bias) is None  # not CUDA: keep cuBLAS/torch
    assert pick_gemv_config(lin.weight, lin.bias, MAX_M + 1) is None
    assert tune_gemv(torch.nn.Sequential(lin)) == {}
