"""decoder_model_bs1 (every decoder layer at batch 1 in one launch, kernels/model_bs1.py) against the layer-by-layer
reference. Under the interpreter it runs on one program, whose grid barriers pass at once."""

import pytest
import torch

from tachyon.kernels.layer_bs1 import grid_barrier
from tachyon.kernels.model_bs1 import decoder_model_bs1_ref, decoder_model_bs1_triton
from tests.kernel_env import CUDA, DEV, NAN, assert_counters_zero, close, needs_triton, tol
from tests.layer_bs1_cases import PAGE, SHAPES, make_case

pytestmark = pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # log(0) of empty splits


@needs_triton
@pytest.mark.timeout(180, method="thread")  # a barrier that never opens hangs rather than fails
@pytest.mark.parametrize("prefetch", ["next", "early"])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_model_kernel(shape, prefetch, monkeypatch):
    """Every layer in one launch (_model_bs1_kernel, pointers from a table): one program under the interpreter, the
    SM count on a GPU. Against the layer-by-layer reference: the last layer's y and h2 and every layer's cache; five
    barriers a layer but the first, each leaving the count at zero."""
    monkeypatch.setenv("TACHYON_LAYER_BS1_PREFETCH", prefetch)
    dtype = torch.float32
    cases = [make_case(shape, dtype, 200, 512, False, seed=s) for s in range(3)]
    base = cases[0]
    layers = [c["lw"] for c in cases]
    common = {k: base[k] for k in ("cos_sin_cache", "slot_mapping", "seq_lens", "block_tables", "max_seq_len")}
    slot = int(base["slot_mapping"][0])
    caches_r = [torch.nan_to_num(c["kv_cache"]) for c in cases]  # each case poisoned its own table's slot
    for c in caches_r:  # every layer's new-key slot is the first case's
        c[:, slot // PAGE, slot % PAGE] = NAN
    caches_t = [c.clone() for c in caches_r]
    bar = grid_barrier(torch.device(DEV))
    gen0 = int(bar[1])
    y_r, h2_r = decoder_model_bs1_ref(base["x"], layers, caches_r, **common)
    y_t, h2_t = decoder_model_bs1_triton(base["x"], layers, caches_t, **common, num_programs=0 if CUDA else 1)
    close(y_t, y_r, dtype)
    close(h2_t, h2_r, dtype)
    for a, b in zip(caches_t, caches_r):
        torch.testing.assert_close(a, b, equal_nan=True, **tol(dtype))
    assert int(bar[0]) == 0 and int(bar[1]) == gen0 + 5 * len(layers) - 1
    assert_counters_zero()
