"""Linear.forward / compute_logits with `out`: the result lands in the caller's buffer (the mixed graphs' shared
logits) and equals the call without it; on a GPU cuBLAS's fp32-output matmul writes it directly, also inside a CUDA
graph capture."""

import pytest
import torch

from tachyon.models.layers import Linear
from tests.kernel_env import CUDA, DEV

# the CPU path copies the same result (exact); on a GPU cuBLAS may pick another algorithm for a given output buffer
TOL = dict(rtol=1e-5, atol=1e-5) if CUDA else dict(rtol=0, atol=0)


def _linear(rows: int, dtype: torch.dtype, gen: torch.Generator, dev: str = DEV) -> tuple[Linear, torch.Tensor]:
    lin = Linear(64, 300).to(dev, dtype)
    with torch.no_grad():
        lin.weight.copy_(torch.randn(300, 64, generator=gen).to(dtype))
    return lin, torch.randn(rows, 64, generator=gen).to(dev, dtype)


@pytest.mark.parametrize("rows", [1, 5, 40])
def test_out_equals_a_fresh_result(rows):
    dtype = torch.bfloat16 if CUDA else torch.float32
    lin, x = _linear(rows, dtype, torch.Generator().manual_seed(rows))
    want = lin(x, out_dtype=torch.float32)
    buf = torch.full((rows + 3, 300), float("nan"), device=DEV)
    got = lin(x, out_dtype=torch.float32, out=buf[:rows])
    assert got.data_ptr() == buf.data_ptr()
    torch.testing.assert_close(buf[:rows], want, **TOL)
    assert torch.isnan(buf[rows:]).all(), "only the given rows are written"
    with pytest.raises(ValueError, match="out is torch.float32"):
        lin(x, out_dtype=torch.bfloat16, out=buf[:rows])


@pytest.mark.skipif(not CUDA, reason="CUDA graph capture")
def test_out_inside_a_cuda_graph():
    lin, x = _linear(40, torch.bfloat16, torch.Generator().manual_seed(0))
    want = lin(x, out_dtype=torch.float32)
    buf = torch.zeros(40, 300, device=DEV)
    lin(x, out_dtype=torch.float32, out=buf)  # warm cuBLAS outside capture
    buf.zero_()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        lin(x, out_dtype=torch.float32, out=buf)
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(buf, want, **TOL)


def test_out_falls_back_to_a_fresh_result_without_the_direct_kernel(monkeypatch):
    """Where the fp32-output matmul cannot write into `out` (a build without that kernel), the layer takes the
    fresh-result matmul, copies it there, and stops trying. On the CPU with a stand-in for that matmul (also on a
    GPU machine: a CUDA layer would take its Triton skinny GEMM at 40 rows, never reaching the matmul)."""
    from tachyon.models import layers

    lin, x = _linear(40, torch.bfloat16, torch.Generator().manual_seed(1), dev="cpu")
    calls = []

    def mm(a, b, out_dtype=None, out=None):
        calls.append(out is not None)
        if out is not None:
            raise NotImplementedError("aten::mm.dtype_out")
        return a.float() @ b.float()

    monkeypatch.setattr(layers, "_MM_OUT_DTYPE_INTO", True)
    monkeypatch.setattr(layers, "_fp32_by_cublas", lambda x: True)
    monkeypatch.setattr(torch, "mm", mm)
    buf = torch.zeros(40, 300)
    got = lin(x, out_dtype=torch.float32, out=buf)
    assert got.data_ptr() == buf.data_ptr() and not layers._MM_OUT_DTYPE_INTO and calls == [True, False]
    torch.testing.assert_close(buf, x.float() @ lin.weight.float().t(), rtol=0, atol=0)
    lin(x, out_dtype=torch.float32, out=buf)
    assert calls == [True, False, False], "no second try"
