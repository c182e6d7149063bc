"""L2 prefetch is a hint: the reference does nothing, and the Triton kernel (GPU only: inline PTX does
not run under the interpreter) leaves every byte as it was, whatever the byte count."""

import pytest
import torch

from tachyon import kernels
from tachyon.kernels.prefetch import CHUNK, LANES, l2_prefetch_ref, l2_prefetch_triton


def test_reference_and_dispatch_change_nothing_on_cpu():
    w = torch.randn(64, 48)
    before = w.clone()
    assert l2_prefetch_ref(w, w.numel() * 4) is None
    kernels.l2_prefetch(w, 10**9)
    assert torch.equal(w, before)


@pytest.mark.skipif(not (torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 9),
                    reason="bulk L2 prefetch needs an sm_90+ GPU")
@pytest.mark.parametrize("nbytes", [0, 15, 16, 1000, CHUNK * LANES + 48, 10**9])
def test_triton_prefetch_leaves_memory_unchanged(nbytes):
    w = torch.randn(3 * CHUNK * LANES // 2 + 24, device="cuda", dtype=torch.bfloat16)
    before = w.clone()
    l2_prefetch_triton(w, nbytes)
    torch.cuda.synchronize()
    assert torch.equal(w, before)
    assert torch.equal(w.float().sum(), before.float().sum())
