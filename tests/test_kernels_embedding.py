"""The decode-step embedding (kernels/embedding.py): the Triton kernel against the reference, the reference
against F.embedding of the where-selected ids, and zero rows for ids outside the vocabulary."""

import pytest
import torch
import torch.nn.functional as F

from tests.kernel_env import DEV, K, needs_triton

V = 50


def step_inputs(B: int, n_last: int = 16, seed: int = 0, out_of_range: bool = False):
    """(input_ids, src, last_tokens): about half the rows read last_tokens (src >= 0), the rest input_ids.
    With `out_of_range`, some ids of both kinds fall outside [0, V)."""
    gen = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(0, V, (B,), generator=gen)
    last_tokens = torch.randint(0, V, (n_last,), generator=gen)
    src = torch.where(torch.rand(B, generator=gen) < 0.5, torch.randint(0, n_last, (B,), generator=gen), -1)
    if out_of_range:
        bad = torch.tensor([-1, V, V + 1000, -(2**40)])
        input_ids[::3] = bad[torch.arange(len(input_ids[::3])) % len(bad)]
        last_tokens[::2] = bad[torch.arange(len(last_tokens[::2])) % len(bad)]
    return input_ids.to(DEV), src.to(DEV), last_tokens.to(DEV)


def selected_ids(input_ids, src, last_tokens):
    """The oracle's id choice, row by row on the host."""
    return torch.tensor([int(last_tokens[s]) if s >= 0 else int(i) for i, s in zip(input_ids.tolist(), src.tolist())])


def weight_of(H: int, dtype: torch.dtype) -> torch.Tensor:
    return torch.randn(V, H, generator=torch.Generator().manual_seed(H)).to(dtype).to(DEV)


@pytest.mark.parametrize("B", [1, 5, 8])
def test_embed_step_ref_matches_embedding(B):
    weight = weight_of(96, torch.float32)
    input_ids, src, last_tokens = step_inputs(B, seed=B)
    want = F.embedding(selected_ids(input_ids, src, last_tokens).to(DEV), weight)
    assert torch.equal(K.embed_step_ref(weight, input_ids, src, last_tokens), want)


def test_embed_step_ref_out_of_range_ids_give_zero_rows():
    weight = weight_of(32, torch.bfloat16)
    input_ids, src, last_tokens = step_inputs(12, seed=3, out_of_range=True)
    ids = selected_ids(input_ids, src, last_tokens)
    out = K.embed_step_ref(weight, input_ids, src, last_tokens)
    bad = (ids < 0) | (ids >= V)
    assert out.dtype == weight.dtype and bad.any() and (~bad).any()
    assert torch.equal(out[bad.to(DEV)], torch.zeros_like(out[bad.to(DEV)]))
    assert torch.equal(out[~bad.to(DEV)], F.embedding(ids[~bad].to(DEV), weight))


@needs_triton
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("B,H", [(1, 40), (5, 1000), (8, 2500), (3, 1024)])
@pytest.mark.parametrize("out_of_range", [False, True])
def test_embed_step_triton_matches_ref(poison, dtype, B, H, out_of_range):
    """Every element is written (torch.empty poisoned with NaN), bit-identical to the reference, including
    H not a multiple of the block and ids outside the vocabulary (zero rows)."""
    weight = weight_of(H, dtype)
    input_ids, src, last_tokens = step_inputs(B, seed=B + H, out_of_range=out_of_range)
    out = K.embed_step_triton(weight, input_ids, src, last_tokens)
    assert out.shape == (B, H) and out.dtype == dtype and not out.isnan().any()
    assert torch.equal(out, K.embed_step_ref(weight, input_ids, src, last_tokens))


@needs_triton
def test_embed_step_triton_int32_ids():
    """input_ids / src / last_tokens of other integer dtypes give the same rows."""
    weight = weight_of(200, torch.float32)
    input_ids, src, last_tokens = step_inputs(6, seed=11)
    want = K.embed_step_ref(weight, input_ids, src, last_tokens)
    got = K.embed_step_triton(weight, input_ids.int(), src.int(), last_tokens.int())
    assert torch.equal(got, want)


def test_embed_step_dispatch_and_empty_batch():
    weight = weight_of(64, torch.float32)
    input_ids, src, last_tokens = step_inputs(4, seed=5)
    assert torch.equal(K.embed_step(weight, input_ids, src, last_tokens),
                       K.embed_step_ref(weight, input_ids, src, last_tokens))
    empty = torch.empty(0, dtype=torch.int64, device=DEV)
    assert K.embed_step(weight, empty, empty, last_tokens).shape == (0, 64)
