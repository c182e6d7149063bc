"""`bench compare BASE NEW`: per-metric ratios NEW/BASE with bootstrap confidence intervals.

Contract: latency metrics (TTFT, TPOT, ITL, E2E; mean and p50/p90) get a percentile-bootstrap CI of
the ratio from per-request values, paired by request id when both runs hold the same requests
(same workload), else resampled independently. A latency metric regresses when its ratio exceeds
1 + threshold and the CI excludes 1 (slower, and not noise). A percentile is judged only when at
least MIN_TAIL_SAMPLES requests of each run lie beyond it (p90 needs 50 requests): below that a few
late requests decide it and its bootstrap CI is not trustworthy, so it is reported with no verdict.
Throughputs (output tok/s, req/s) are single numbers per run and regress when the ratio falls below
1 / (1 + threshold).
`compare_results` matches runs by label (a lone run on each side always matches).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from tachyon.bench import metrics as M
from tachyon.bench.schema import BenchResult, RequestRecord, Run

LATENCY: dict[str, Callable[[RequestRecord], float | None]] = {
    "ttft": M.ttft, "tpot": M.tpot, "itl": M.request_itl, "e2e": M.e2e}
STATS = ("mean", "p50", "p90")
THROUGHPUT = ("output_throughput", "request_throughput", "total_throughput")
MIN_TAIL_SAMPLES = 5


@dataclass
class MetricDelta:
    run: str
    metric: str
    base: float
    new: float
    ratio: float
    ci_lo: float | None
    ci_hi: float | None
    lower_is_better: bool
    regression: bool
    improvement: bool
    judged: bool = True  # False: too few samples beyond this percentile for a verdict


def _stat(xs: list[float], stat: str) -> float:
    if stat == "mean":
        return sum(xs) / len(xs)
    return M.percentile(xs, float(stat[1:]))  # type: ignore[return-value]


def tail_samples(n: int, stat: str) -> int:
    """How many of n samples lie beyond the statistic (the mean counts as the median)."""
    pct = 50 if stat == "mean" else int(stat[1:])
    return n * min(pct, 100 - pct) // 100


def _values(run: Run, fn) -> dict[str, float]:
    out = {}
    for r in run.requests:
        v = fn(r)
        if v is not None:
            out[r.id] = v
    return out


def bootstrap_ratio(base: dict[str, float], new: dict[str, float], stat: str, n_boot: int = 1000,
                    seed: int = 0, conf: float = 0.95) -> tuple[float, float, float]:
    """(ratio, lo, hi) of stat(new)/stat(base); paired resampling when the ids coincide."""
    rng = random.Random(seed)
    b, n = list(base.values()), list(new.values())
    point = _stat(n, stat) / _stat(b, stat)
    paired = base.keys() == new.keys()
    keys = list(base.keys())
    ratios = []
    for _ in range(n_boot):
        if paired:
            ks = [keys[rng.randrange(len(keys))] for _ in keys]
            bs, ns = [base[k] for k in ks], [new[k] for k in ks]
        else:
            bs = [b[rng.randrange(len(b))] for _ in b]
            ns = [n[rng.randrange(len(n))] for _ in n]
        den = _stat(bs, stat)
        if den > 0:
            ratios.append(_stat(ns, stat) / den)
    if not ratios:
        return point, point, point
    a = (1 - conf) / 2 * 100
    return point, M.percentile(ratios, a), M.percentile(ratios, 100 - a)  # type: ignore[return-value]


def compare_runs(base: Run, new: Run, threshold: float = 0.10, n_boot: int = 1000,
                 seed: int = 0) -> list[MetricDelta]:
    out: list[MetricDelta] = []
    for name, fn in LATENCY.items():
        bv, nv = _values(base, fn), _values(new, fn)
        if len(bv) < 2 or len(nv) < 2:
            continue
        for stat in STATS:
            try:
                ratio, lo, hi = bootstrap_ratio(bv, nv, stat, n_boot, seed)
            except ZeroDivisionError:
                continue
            judged = tail_samples(min(len(bv), len(nv)), stat) >= MIN_TAIL_SAMPLES
            out.append(MetricDelta(new.label, f"{name}_{stat}", _stat(list(bv.values()), stat),
                                   _stat(list(nv.values()), stat), ratio, lo, hi, True,
                                   regression=judged and ratio > 1 + threshold and lo > 1.0,
                                   improvement=judged and ratio < 1 / (1 + threshold) and hi < 1.0,
                                   judged=judged))
    for name in THROUGHPUT:
        b, n = getattr(base.summary, name), getattr(new.summary, name)
        if b and n is not None:
            r = n / b
            out.append(MetricDelta(new.label, name, b, n, r, None, None, False,
                                   regression=r < 1 / (1 + threshold), improvement=r > 1 + threshold))
    return out


def match_runs(base: BenchResult, new: BenchResult) -> list[tuple[Run, Run]]:
    if len(base.runs) == 1 and len(new.runs) == 1:
        return [(base.runs[0], new.runs[0])]
    by_label = {r.label: r for r in base.runs}
    return [(by_label[r.label], r) for r in new.runs if r.label in by_label]


def compare_results(base: BenchResult, new: BenchResult, threshold: float = 0.10, n_boot: int = 1000,
                    seed: int = 0) -> list[MetricDelta]:
    pairs = match_runs(base, new)
    if not pairs:
        raise ValueError("no runs in common between the two results (labels differ)")
    return [d for b, n in pairs for d in compare_runs(b, n, threshold, n_boot, seed)]


def format_table(deltas: list[MetricDelta]) -> str:
    lines = ["| run | metric | base | new | ratio | 95% CI | verdict |", "|---|---|---|---|---|---|---|"]
    for d in deltas:
        ci = f"[{d.ci_lo:.3f}, {d.ci_hi:.3f}]" if d.ci_lo is not None else "-"
        verdict = ("REGRESSION" if d.regression else "improved" if d.improvement
                   else "ok" if d.judged else "too few samples")
        unit = 1e3 if d.lower_is_better else 1.0
        lines.append(f"| {d.run} | {d.metric}{' (ms)' if d.lower_is_better else ''} | {d.base * unit:.3f} | "
                     f"{d.new * unit:.3f} | {d.ratio:.3f} | {ci} | {verdict} |")
    return "\n".join(lines)
