"""Sweeps and capacity: a ladder of load points, knee detection, SLO max-sustainable-rate search.

Contracts:
- `run_ladder(cfg, reqs, values, mode)`: one `Run` per concurrency (mode "concurrency", closed
  loop) or per rate (mode "rate", cfg.process arrivals).
- `find_knee(runs)`: index of the last point before throughput stops growing (< `min_gain`
  relative gain) while latency (p50 E2E) keeps rising (> `min_rise`); None if no knee.
- `max_sustainable_rate(cfg, reqs, slo, start)`: doubles the rate from `start` until the run-level
  SLO fails (bracketing), then bisects between the last pass and first fail until the bracket is
  within `rel_tol`; returns (highest passing rate or 0.0, probe runs in order). Each probe lasts at
  least `min_duration_s` of arrivals (requests repeated), so an overload has time to build a queue.
- `replicas_needed(qps, max_rate, headroom)`: ceil(qps / (max_rate * (1 - headroom))).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

from tachyon.bench.datasets import ServeRequest
from tachyon.bench.schema import SLO, Run
from tachyon.bench.serve import LoadConfig, run_point

Log = Callable[[str], None]


def run_ladder(cfg: LoadConfig, reqs: list[ServeRequest], values: list[float], mode: str,
               slo: SLO | None = None, log: Log = print) -> list[Run]:
    runs = []
    for v in values:
        if mode == "concurrency":
            point = replace(cfg, process="closed", concurrency=int(v), rate=None)
        elif mode == "rate":
            point = replace(cfg, process=cfg.process if cfg.process != "closed" else "poisson", rate=float(v))
        else:
            raise ValueError(f"sweep mode must be concurrency or rate, got {mode!r}")
        run = run_point(point, reqs, slo)
        log(_line(run))
        runs.append(run)
    return runs


def _line(run: Run) -> str:
    s = run.summary
    ok = "" if s.slo_pass is None else ("  SLO pass" if s.slo_pass else "  SLO FAIL")
    ttft = f"{s.ttft.p99 * 1e3:.0f}" if s.ttft.p99 is not None else "-"
    tpot = f"{s.tpot.p99 * 1e3:.1f}" if s.tpot.p99 is not None else "-"
    return (f"{run.label:>28}: {s.request_throughput:7.2f} req/s {s.output_throughput:9.1f} tok/s  "
            f"p99 TTFT {ttft} ms  p99 TPOT {tpot} ms  errors {s.num_failed}{ok}")


def find_knee(runs: list[Run], min_gain: float = 0.10, min_rise: float = 0.20) -> int | None:
    for i in range(1, len(runs)):
        a, b = runs[i - 1].summary, runs[i].summary
        if not a.output_throughput or a.e2e.p50 is None or b.e2e.p50 is None:
            continue
        gain = b.output_throughput / a.output_throughput - 1
        rise = b.e2e.p50 / a.e2e.p50 - 1
        if gain < min_gain and rise > min_rise:
            return i - 1
    return None


def probe_requests(reqs: list[ServeRequest], rate: float, min_duration_s: float) -> list[ServeRequest]:
    """`reqs`, repeated cyclically to last at least `min_duration_s` of arrivals at `rate`."""
    n = max(len(reqs), math.ceil(rate * min_duration_s))
    return [reqs[i % len(reqs)] for i in range(n)]


def max_sustainable_rate(cfg: LoadConfig, reqs: list[ServeRequest], slo: SLO, start: float = 1.0,
                         max_rate: float = 1e4, rel_tol: float = 0.1, max_probes: int = 12,
                         min_duration_s: float = 0.0, log: Log = print) -> tuple[float, list[Run]]:
    process = cfg.process if cfg.process not in ("closed",) else "poisson"
    probes: list[Run] = []

    def probe(rate: float) -> bool:
        run = run_point(replace(cfg, process=process, rate=rate), probe_requests(reqs, rate, min_duration_s), slo)
        run.summary.extra["probe"] = len(probes)
        probes.append(run)
        log(_line(run))
        return bool(run.summary.slo_pass)

    lo, hi, rate = 0.0, None, start
    while len(probes) < max_probes and rate <= max_rate:
        if probe(rate):
            lo, rate = rate, rate * 2
        else:
            hi = rate
            break
    if hi is None:
        return lo, probes
    if lo == 0.0:  # the first probe failed: look below it
        rate = hi / 2
        while len(probes) < max_probes and rate > start / 64:
            if probe(rate):
                lo = rate
                break
            hi, rate = rate, rate / 2
        if lo == 0.0:
            return 0.0, probes
    while len(probes) < max_probes and (hi - lo) / lo > rel_tol:
        mid = (lo + hi) / 2
        if probe(mid):
            lo = mid
        else:
            hi = mid
    return lo, probes


def replicas_needed(qps: float, max_rate: float, headroom: float = 0.2) -> int | None:
    if not 0 <= headroom < 1:
        raise ValueError(f"headroom must be in [0, 1), got {headroom}")
    if max_rate <= 0:
        return None
    return max(1, math.ceil(qps / (max_rate * (1 - headroom))))
