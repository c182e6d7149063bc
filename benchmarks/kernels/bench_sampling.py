"""Sampling benchmarks of run_all.py: penalties, the sampler per mode (with a full-sort torch baseline), its
token distribution against the exact one, and the sampler's search sweep. Rows go to harness.ROWS / .SWEEP."""

import math
import sys

import torch
from harness import DEV, ROWS, SMOKE, SWEEP, VOCAB, bench, guarded, record
from timing import rel_err

import tachyon.kernels as K


@guarded
def b_penalties(B: int, gen):
    """A batch of penalised rows: each row's counts and prompt flags (~1% of the vocabulary) in its own slot."""
    logits = torch.randn(B, VOCAB, device=DEV, generator=gen) * 3
    hits = torch.rand(B, VOCAB, device=DEV, generator=gen) < 0.01
    counts = (torch.randint(1, 4, (B, VOCAB), device=DEV, generator=gen) * hits).to(torch.int32)
    seen = torch.rand(B, VOCAB, device=DEV, generator=gen) < 0.01
    rows = torch.arange(B, device=DEV)
    params = torch.tensor([[1.2, 0.3, 0.4]], device=DEV).expand(B, 3).contiguous()
    a, b = logits.clone(), logits.clone()
    K.apply_penalties_triton(a, rows, rows, counts, seen, params)
    K.apply_penalties_ref(b, rows, rows, counts, seen, params)
    record("penalties", f"B={B} V={VOCAB}", lambda: K.apply_penalties_triton(logits, rows, rows, counts, seen, params),
           B * VOCAB * (4 + 4 + 4 + 1), 0, rel_err(a, b), 1e-4,
           ref_fn=lambda: K.apply_penalties_ref(logits, rows, rows, counts, seen, params))


def sample_params(B: int, T: float, k: int, p: float, mp: float, seed0: int = 0) -> dict:
    """sample_triton's per-row keyword tensors: every row temperature T, top-k k, top-p p, min-p mp; seeds
    seed0.. seed0 + B - 1, step 3."""
    return dict(temperature=torch.full((B,), T, device=DEV), top_k=torch.full((B,), k, dtype=torch.int32,
                device=DEV), top_p=torch.full((B,), p, device=DEV), min_p=torch.full((B,), mp, device=DEV),
                seeds=torch.arange(seed0, seed0 + B, device=DEV), steps=torch.full((B,), 3, device=DEV))


def torch_sort_sampler(logits, prm):
    """Vectorised full-sort baseline (what a plain-torch GPU sampler does) for comparison."""
    s = logits / prm["temperature"].clamp_min(1e-5)[:, None]
    vals, idx = s.sort(dim=-1, descending=True)
    probs = vals.softmax(-1)
    keep = (probs.cumsum(-1) - probs) < prm["top_p"][:, None]
    probs = probs.masked_fill(~keep, 0)
    return idx.gather(1, torch.multinomial(probs, 1)).squeeze(1)


@guarded
def b_sample(B: int, mode: str, gen):
    """One row "sample" per mode: greedy must equal argmax, other modes must draw from each row's kept set;
    torch_sort_baseline_us times torch_sort_sampler on the same logits."""
    cfg = {"greedy": (0.0, 0, 1.0, 0.0), "temperature": (0.8, 0, 1.0, 0.0), "top_p0.9": (0.7, 0, 0.9, 0.0),
           "top_k50": (1.0, 50, 1.0, 0.0), "k50_p0.9_minp0.05": (1.0, 50, 0.9, 0.05)}[mode]
    logits = torch.randn(B, VOCAB, device=DEV, generator=gen) * 3
    prm = sample_params(B, *cfg)
    tok = K.sample_triton(logits, **prm)
    if mode == "greedy":
        err = 0.0 if torch.equal(tok, logits.argmax(-1)) else 1.0
    else:  # the drawn token must lie in the kept set of its row (checked with the full-sort reference)
        err = float(not bool(_in_kept_set(logits, tok, *cfg).all()))
    record("sample", f"B={B} V={VOCAB} {mode}", lambda: K.sample_triton(logits, **prm), B * VOCAB * 4, 0,
           err, 0.0, torch_sort_baseline_us=bench(lambda: torch_sort_sampler(logits, prm)))


def _in_kept_set(logits, tok, T, k, p, mp) -> torch.Tensor:
    """Per row: whether token `tok` survives temperature T, top-k k, top-p p and min-p mp (float64 full sort)."""
    s = logits.double() / T
    vals, idx = s.sort(dim=-1, descending=True)
    keep = torch.ones_like(vals, dtype=torch.bool)
    if 0 < k < vals.shape[1]:
        keep[:, k:] = False
    probs = vals.masked_fill(~keep, -math.inf).softmax(-1)
    if p < 1:
        keep &= (probs.cumsum(-1) - probs) < p
    if mp > 0:
        keep &= vals >= vals[:, :1] + math.log(mp)
    rank = (idx == tok[:, None]).int().argmax(-1)
    return keep.gather(1, rank[:, None]).squeeze(1)


@guarded
def b_sample_distribution(gen):
    """Many draws of one small-vocab row per config: frequencies against the exact distribution."""
    V, n = 32, 20000 if not SMOKE else 50
    base = torch.randn(V, device=DEV, generator=gen) * 1.5
    worst = 0.0
    for T, k, p, mp in [(0.8, 0, 1.0, 0.0), (1.0, 5, 1.0, 0.0), (1.0, 0, 0.7, 0.0), (1.2, 8, 0.8, 0.05)]:
        tok = K.sample_triton(base.expand(n, V).contiguous(), **sample_params(n, T, k, p, mp, seed0=77))
        s = base.double().cpu() / T
        vals, idx = s.sort(descending=True)
        keep = torch.ones(V, dtype=torch.bool)
        if 0 < k < V:
            keep[k:] = False
        probs = vals.masked_fill(~keep, -math.inf).softmax(0)
        if p < 1:
            keep &= (probs.cumsum(0) - probs) < p
        if mp > 0:
            keep &= probs >= mp * probs[0]
        exp = torch.zeros(V, dtype=torch.float64)
        exp[idx] = vals.masked_fill(~keep, -math.inf).softmax(0)
        freq = torch.bincount(tok.cpu(), minlength=V).double() / n
        worst = max(worst, 0.5 * (freq - exp).abs().sum().item() + (freq[exp == 0].sum().item() > 0))
    ROWS.append(dict(kernel="sample_distribution", shape=f"V={V} n={n} x4 configs", tv_distance=worst,
                     ok=worst < (0.04 if not SMOKE else 0.5)))
    print(f"sample distribution: worst total-variation distance {worst:.4f}", flush=True)


@guarded
def sweep_sampling(gen):
    """Search ways per pass, and candidates on/off (CANDIDATES=1 forces whole-row searches)."""
    sm = sys.modules["tachyon.kernels.sampling"]
    saved = (sm.SEARCH_WAYS, sm.CANDIDATES)
    cases = {"B=1 top_p0.9 T0.7": (1, (0.7, 0, 0.9, 0.0)), "B=1 top_k50": (1, (1.0, 50, 1.0, 0.0)),
             "B=8 k50_p0.9_minp0.05": (8, (1.0, 50, 0.9, 0.05))}
    for name, (B, cfg) in cases.items():
        logits = torch.randn(B, VOCAB, device=DEV, generator=gen) * 3
        prm = sample_params(B, *cfg)
        for ways, cand in [(2, 4096), (4, 4096), (8, 4096), (4, 1)]:
            sm.SEARCH_WAYS, sm.CANDIDATES = ways, cand
            tok = K.sample_triton(logits, **prm)
            ok = bool(_in_kept_set(logits, tok, *cfg).all())
            row = dict(kind="sample " + name, config=dict(ways=ways, candidates=cand), ok=ok,
                       time_us=bench(lambda: K.sample_triton(logits, **prm)))  # noqa: B023
            SWEEP.append(row)
            print("sweep", row, flush=True)
    sm.SEARCH_WAYS, sm.CANDIDATES = saved
