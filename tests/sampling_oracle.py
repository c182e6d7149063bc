"""The independent filtered-softmax oracle (a float64 full sort), per-row sampling parameters and the draw checks."""

import math

import torch

from tests.kernel_env import DEV


def row_params(B, T, k=0, p=1.0, mp=0.0, seed0=0):
    return dict(
        temperature=torch.full((B,), T, device=DEV),
        top_k=torch.full((B,), k, dtype=torch.int32, device=DEV),
        top_p=torch.full((B,), p, device=DEV),
        min_p=torch.full((B,), mp, device=DEV),
        seeds=torch.arange(seed0, seed0 + B, dtype=torch.int64, device=DEV),
        steps=torch.zeros(B, dtype=torch.int64, device=DEV),
    )


def expected_probs(logits, T, k, p, mp):
    """The target distribution, spelled out with a full sort (HF order: top-k, top-p, min-p)."""
    s = logits.double() / T
    vals, idx = s.sort(descending=True)
    n = len(vals)
    keep = torch.ones(n, dtype=torch.bool)
    if 0 < k < n:
        keep[k:] = False
    probs = torch.softmax(vals.masked_fill(~keep, -math.inf), 0)
    if p < 1:
        keep &= (probs.cumsum(0) - probs) < p
    if mp > 0:
        keep &= probs >= mp * probs[0]
    probs = torch.softmax(vals.masked_fill(~keep, -math.inf), 0)
    out = torch.zeros(n, dtype=torch.float64)
    out[idx] = probs
    return out


SAMPLE_CASES = [(0.8, 0, 1.0, 0.0), (1.0, 4, 1.0, 0.0), (1.0, 0, 0.7, 0.0), (0.7, 0, 1.0, 0.1),
                (1.3, 6, 0.8, 0.05)]


def draw_ok(tokens, probs, n):
    """Support respected, and a chi-square statistic far from a gross mismatch."""
    counts = torch.bincount(tokens.cpu(), minlength=len(probs)).double()
    assert counts[probs == 0].sum() == 0, "token outside the kept set"
    sup = probs > 0
    e = probs[sup] * n
    chi2 = ((counts[sup] - e) ** 2 / e).sum().item()
    df = max(int(sup.sum()) - 1, 1)
    assert chi2 < df + 8 * math.sqrt(2 * df) + 12, (chi2, df)
    tv = 0.5 * (counts / n - probs).abs().sum().item()
    assert tv < max(0.12, math.sqrt((df + 1) / n)), tv  # (the noise alone is ~0.1 at n = 100)
