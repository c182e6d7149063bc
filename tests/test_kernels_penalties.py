"""kernels.apply_penalties: the Triton kernel and its torch reference against the per-element formulas (HF's
repetition penalty, OpenAI's frequency and presence penalties), written out token by token."""

import pytest
import torch

from tests.kernel_env import CUDA, DEV, K, needs_triton

V = 3001  # two column blocks of the kernel, the second ragged


def _case(seed: int):
    """Six slots of random counts / prompt flags, four listed rows of an eight-row batch, mixed params."""
    g = torch.Generator().manual_seed(seed)
    counts = torch.randint(0, 4, (6, V), generator=g, dtype=torch.int32) * (torch.rand(6, V, generator=g) < 0.01)
    seen = torch.rand(6, V, generator=g) < 0.01
    logits = torch.randn(8, V, generator=g) * 3
    rows, slots = [6, 1, 3, 4], [2, 5, 0, 2]  # slot 2 serves two rows
    params = torch.tensor([[1.3, 0.0, 0.0], [1.0, 0.4, 0.7], [0.8, -0.5, 0.25], [1.0, 0.0, 0.0]])
    return logits, rows, slots, counts.to(torch.int32), seen, params


def _oracle(logits, rows, slots, counts, seen, params):
    out = logits.clone()
    for row, slot, (rp, f, p) in zip(rows, slots, params.tolist()):
        x = out[row]
        for t in torch.nonzero(seen[slot] | (counts[slot] > 0)).flatten().tolist():
            x[t] = x[t] / rp if x[t] > 0 else x[t] * rp
        for t in torch.nonzero(counts[slot]).flatten().tolist():
            x[t] = x[t] - f * int(counts[slot, t]) - p
    return out


@pytest.mark.parametrize("impl", ["ref", pytest.param("triton", marks=needs_triton)])
@pytest.mark.parametrize("seed", [0, 1])
def test_apply_penalties_matches_the_formulas(impl, seed):
    logits, rows, slots, counts, seen, params = _case(seed)
    exp = _oracle(logits, rows, slots, counts, seen, params)
    got = logits.clone().to(DEV)
    fn = K.apply_penalties_ref if impl == "ref" else K.apply_penalties_triton
    fn(got, torch.tensor(rows, device=DEV), torch.tensor(slots, device=DEV), counts.to(DEV), seen.to(DEV),
       params.to(DEV))
    got = got.cpu()
    assert not torch.isnan(got).any()
    torch.testing.assert_close(got, exp, rtol=1e-4, atol=1e-4)
    for r in (0, 2, 5, 7):  # rows not listed: untouched, bit for bit
        assert torch.equal(got[r], logits[r])
    assert torch.equal(got[4], logits[4])  # neutral params: unchanged bit for bit, though slot 2 has counts
    assert not torch.equal(got[6], logits[6]) and not torch.equal(got[1], logits[1])


@needs_triton
def test_apply_penalties_triton_equals_reference_exactly():
    """Division rounded to nearest and no fused multiply-add on the penalised elements: same bits on CPU
    (interpreter); within one ulp on the GPU, where the compiler may fuse f * c into the subtraction."""
    logits, rows, slots, counts, seen, params = _case(2)
    args = (torch.tensor(rows, device=DEV), torch.tensor(slots, device=DEV), counts.to(DEV), seen.to(DEV),
            params.to(DEV))
    a, b = logits.clone().to(DEV), logits.clone().to(DEV)
    K.apply_penalties_ref(a, *args)
    K.apply_penalties_triton(b, *args)
    if CUDA:
        torch.testing.assert_close(a, b, rtol=2e-7, atol=1e-6)
    else:
        assert torch.equal(a, b)


def test_apply_penalties_with_no_rows_is_a_no_op():
    logits, _, _, counts, seen, _ = _case(3)
    got = logits.clone().to(DEV)
    empty = torch.empty(0, dtype=torch.long, device=DEV)
    K.apply_penalties(got, empty, empty, counts.to(DEV), seen.to(DEV), torch.empty(0, 3, device=DEV))
    assert torch.equal(got.cpu(), logits)
