"""The sampler's Triton threshold search: its kept set against a float64 full sort (small and large rows,
candidate caps), every path and chunking against each other, and its scratch buffers kept in bounds."""

import importlib
import math

import pytest
import torch

from tests.kernel_env import DEV, NAN, needs_triton
from tests.sampling_oracle import SAMPLE_CASES, expected_probs, row_params


@needs_triton
@pytest.mark.parametrize("cap", [4096, 8, 3])  # 8: brackets refined; 3: often the whole-row fallback
def test_sampling_kept_set(monkeypatch, cap):
    """The Triton kernel's threshold search keeps exactly the tokens the sort-based definition keeps."""
    sampling = importlib.import_module("tachyon.kernels.sampling")
    monkeypatch.setattr(sampling, "CANDIDATES", cap)
    gen = torch.Generator().manual_seed(10)
    cases = SAMPLE_CASES + [(1.0, 1000, 0.5, 0.0), (0.5, 3, 1.0, 0.2), (2.0, 0, 0.95, 0.0), (1.0, 49, 0.3, 0.0)]
    B, V = len(cases), 50
    logits = torch.randn(B, V, generator=gen) * 2
    logits[1, :5] = logits[1].max() + 1  # 5 tied top tokens, top_k 4: ties are kept together
    params = row_params(B, 1.0)
    for r, (T, k, p, mp) in enumerate(cases):
        params["temperature"][r], params["top_k"][r], params["top_p"][r], params["min_p"][r] = T, k, p, mp
    key_thr = torch.full((B,), -7, dtype=torch.int32, device=DEV)
    s_min = torch.full((B,), NAN, device=DEV)
    sampling.sample_triton(logits.to(DEV), **params, thresholds=(key_thr, s_min))
    key_thr, s_min = key_thr.cpu(), s_min.cpu()
    for r, (T, k, p, mp) in enumerate(cases):
        s = logits[r] * params["temperature"][r].cpu().reciprocal()
        bits = s.view(torch.int32)
        key = torch.where(bits >= 0, bits, bits ^ 0x7FFFFFFF)
        kept = (key >= key_thr[r]) & (s >= s_min[r])
        expect = expected_probs(logits[r], T, k, p, mp) > 0
        if r == 1:  # ties at the top-k boundary keep every token of the boundary value
            assert torch.equal(kept.nonzero().flatten(), torch.arange(5))
        else:
            assert torch.equal(kept, expect), (r, kept.nonzero().flatten(), expect.nonzero().flatten())


def sampling_kept_mask(logits, params, key_thr, s_min):
    """The kept set that sample_triton's thresholds define, per row."""
    s = logits * params["temperature"].cpu().reciprocal()[:, None]
    bits = s.view(torch.int32)
    key = torch.where(bits >= 0, bits, bits ^ 0x7FFFFFFF)
    return (key >= key_thr.cpu()[:, None]) & (s >= s_min.cpu()[:, None])


def sampling_set_rows(params, cases):
    for r, (T, k, p, mp) in enumerate(cases):
        params["temperature"][r], params["top_k"][r], params["top_p"][r], params["min_p"][r] = T, k, p, mp
    return params


@needs_triton
@pytest.mark.parametrize("cap", [4096, 256])
def test_sampling_kept_set_large(monkeypatch, cap):
    """Flat rows whose kept set (up to ~45k tokens) is far larger than the candidate buffer: the
    histogram brackets hold the thresholds (compacted directly when they fit, else refined once), and
    the kept set is exactly the sort-based one."""
    sampling = importlib.import_module("tachyon.kernels.sampling")
    monkeypatch.setattr(sampling, "CANDIDATES", cap)
    monkeypatch.setattr(sampling, "MAX_CHUNKS", 6)  # few programs: the interpreter is slow
    gen = torch.Generator().manual_seed(11)
    V = 50_000
    cases = [(0.7, 0, 0.9, 0.0), (0.7, 0, 0.9, 0.0), (1.0, 30_000, 0.95, 0.0), (1.0, 20_000, 1.0, 0.02)]
    scales = torch.tensor([0.01, 1.0, 1.0, 0.3])
    logits = torch.randn(len(cases), V, generator=gen) * scales[:, None]
    params = sampling_set_rows(row_params(len(cases), 1.0), cases)
    key_thr = torch.full((len(cases),), -7, dtype=torch.int32, device=DEV)
    s_min = torch.full((len(cases),), NAN, device=DEV)
    tokens = sampling.sample_triton(logits.to(DEV), **params, thresholds=(key_thr, s_min)).cpu()
    kept = sampling_kept_mask(logits, params, key_thr, s_min)
    for r, (T, k, p, mp) in enumerate(cases):
        expect = expected_probs(logits[r], T, k, p, mp) > 0
        assert expect.sum() > 4096
        assert torch.equal(kept[r], expect), (r, int(kept[r].sum()), int(expect.sum()))
        assert kept[r, tokens[r]]


@needs_triton
def test_sampling_paths_agree(monkeypatch):
    """Every path (candidates compacted directly, brackets refined, whole-row fallback) and every
    chunking of the vocabulary (i.e. every batch size) give the same kept set and the same token: each
    token's Gumbel score is a function of its row, seed, step and index only, and cross-program
    masses are exact fixed-point sums."""
    sampling = importlib.import_module("tachyon.kernels.sampling")
    monkeypatch.setattr(sampling, "STREAM_BLOCK", 128)  # up to 4 chunks of V = 500
    monkeypatch.setattr(sampling, "HIST_BINS", 32)  # coarse bins: wide brackets
    gen = torch.Generator().manual_seed(12)
    V, seeds_per_row = 500, 3
    cases = [(1.0, 0, 0.9, 0.0), (0.8, 40, 0.9, 0.0), (1.0, 300, 0.95, 0.05), (1.0, 200, 1.0, 0.0)]
    scales = [0.05, 0.5, 1.0, 0.3]
    rows = [(torch.randn(V, generator=gen) * sc, case) for sc, case in zip(scales, cases)]
    logits = torch.stack([x for x, _ in rows for _ in range(seeds_per_row)])
    all_cases = [case for _, case in rows for _ in range(seeds_per_row)]
    params = sampling_set_rows(row_params(len(all_cases), 1.0, seed0=40), all_cases)
    results = []
    # direct in 4 chunks; refined in 1 chunk; refined, or (the last two rows) whole-row fallback, in 2
    for max_chunks, cap in [(4, 4096), (1, 8), (2, 2)]:
        monkeypatch.setattr(sampling, "MAX_CHUNKS", max_chunks)
        monkeypatch.setattr(sampling, "CANDIDATES", cap)
        key_thr = torch.full((len(all_cases),), -7, dtype=torch.int32, device=DEV)
        s_min = torch.full((len(all_cases),), NAN, device=DEV)
        tokens = sampling.sample_triton(logits.to(DEV), **params, thresholds=(key_thr, s_min))
        results.append((tokens.cpu(), key_thr.cpu(), s_min.cpu()))
    kept = sampling_kept_mask(logits, params, *results[0][1:])
    for r, (T, k, p, mp) in enumerate(all_cases):
        assert torch.equal(kept[r], expected_probs(logits[r], T, k, p, mp) > 0), r
        assert kept[r, results[0][0][r]]
    for tokens, key_thr, s_min in results[1:]:  # (a count search may stop at any key between two tokens)
        assert torch.equal(sampling_kept_mask(logits, params, key_thr, s_min), kept)
        assert torch.equal(tokens, results[0][0])


@needs_triton
@pytest.mark.parametrize("max_chunks,cap", [(4, 4096), (1, 8), (2, 2)])
def test_sampling_scratch_in_bounds(monkeypatch, max_chunks, cap):
    """Every scratch buffer sample_triton allocates is surrounded by sentinel guard zones: no kernel
    store may land outside its buffer (the interpreter does not check out-of-bounds pointers, a GPU
    faults or silently corrupts a neighbour), and the sampled tokens are valid vocabulary indices."""
    sampling = importlib.import_module("tachyon.kernels.sampling")
    monkeypatch.setattr(sampling, "STREAM_BLOCK", 128)
    monkeypatch.setattr(sampling, "HIST_BINS", 32)
    monkeypatch.setattr(sampling, "MAX_CHUNKS", max_chunks)
    monkeypatch.setattr(sampling, "CANDIDATES", cap)
    guard, allocs = 1024, []

    def guarded_empty(*size, dtype=None, device=None):
        n = math.prod(size[0] if len(size) == 1 and isinstance(size[0], (tuple, list)) else size)
        sentinel = NAN if dtype.is_floating_point else -123456789
        buf = torch.full((n + 2 * guard,), sentinel, dtype=dtype, device=device)
        allocs.append((buf, n))
        return buf[guard : guard + n].view(*size)

    proxy = type("GuardedTorch", (), {"__getattr__": lambda self, name: getattr(torch, name)})()
    proxy.empty = guarded_empty
    monkeypatch.setattr(sampling, "torch", proxy)
    gen = torch.Generator().manual_seed(12)
    V = 500
    cases = [(1.0, 0, 0.9, 0.0), (0.8, 40, 0.9, 0.0), (1.0, 300, 0.95, 0.05), (1.0, 200, 1.0, 0.0)]
    scales = [0.05, 0.5, 1.0, 0.3]
    logits = torch.stack([torch.randn(V, generator=gen) * sc for sc in scales])
    params = sampling_set_rows(row_params(len(cases), 1.0), cases)
    tokens = sampling.sample_triton(logits.to(DEV), **params).cpu()
    assert len(allocs) >= 4
    for buf, n in allocs:
        for zone in (buf[:guard], buf[guard + n :]):
            intact = zone.isnan() if zone.is_floating_point() else zone == -123456789
            assert bool(intact.all()), (buf.dtype, n)
    assert bool(((tokens >= 0) & (tokens < V)).all()), tokens
