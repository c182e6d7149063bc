"""The one place benchmark metrics are computed (definitions: shared/BENCHMARKS.md).

Input is a list of `RequestRecord`s (times in seconds on one clock). Per request:
- TTFT = first token-bearing chunk − sent; undefined without a token or on failure.
- E2E  = last token-bearing chunk − sent (or `end` − sent when no chunk was timed).
- TPOT = (E2E − TTFT) / (N − 1), the first token excluded; undefined for N <= 1.
- ITL  = gaps between consecutive token-bearing chunks. A gap delivering k tokens counts as k
  intervals of gap/k (token-normalised); the per-request ITL is their mean, the pooled ITL pools
  them over all requests; `chunk_gap` pools raw chunk gaps (what chunk-weighted tools report).
N is `output_tokens` when known (server usage), else the sum of chunk token counts.
Throughputs count successful requests over the measured window (first sent → last byte of any
request). Goodput: successful requests/s meeting every per-request SLO bound (a request with no
token never does); `slo_pass`: each bound met at the SLO's percentile and error rate within limit.
Failed requests count only in the error rate and the window.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from tachyon.bench.schema import SLO, RequestRecord, Stats, Summary

SLO_PRESETS: dict[str, SLO] = {
    "mlperf-server": SLO(name="mlperf-server", ttft_s=2.0, tpot_s=0.100),
    "interactive": SLO(name="interactive", ttft_s=0.500, tpot_s=0.030),
}


def make_slo(preset: str | None = None, ttft_ms: float | None = None, tpot_ms: float | None = None,
             e2e_ms: float | None = None, percentile: float | None = None,
             max_error_rate: float | None = None) -> SLO | None:
    """A preset, optionally overridden by custom bounds (milliseconds); None when nothing is given."""
    if preset is None and ttft_ms is None and tpot_ms is None and e2e_ms is None:
        return None
    if preset is not None and preset not in SLO_PRESETS and preset != "custom":
        raise ValueError(f"unknown SLO preset {preset!r}; choose from {sorted(SLO_PRESETS)} or custom")
    slo = SLO_PRESETS[preset].model_copy() if preset in SLO_PRESETS else SLO(name="custom")
    if ttft_ms is not None:
        slo.ttft_s, slo.name = ttft_ms / 1e3, "custom"
    if tpot_ms is not None:
        slo.tpot_s, slo.name = tpot_ms / 1e3, "custom"
    if e2e_ms is not None:
        slo.e2e_s, slo.name = e2e_ms / 1e3, "custom"
    if percentile is not None:
        slo.percentile = percentile
    if max_error_rate is not None:
        slo.max_error_rate = max_error_rate
    return slo


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (numpy's default), q in [0, 100]; None for no values."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def stats(values: Iterable[float | None]) -> Stats:
    xs = [float(v) for v in values if v is not None]
    if not xs:
        return Stats()
    return Stats(n=len(xs), mean=sum(xs) / len(xs), p50=percentile(xs, 50), p90=percentile(xs, 90),
                 p99=percentile(xs, 99), min=min(xs), max=max(xs))


def ok(r: RequestRecord) -> bool:
    return r.error is None


def _chunks(r: RequestRecord) -> list[tuple[float, int]]:
    return [(t, k) for t, k in zip(r.chunk_times, r.chunk_tokens, strict=True) if k > 0]


def num_output_tokens(r: RequestRecord) -> int:
    if r.output_tokens is not None:
        return r.output_tokens
    return sum(k for _, k in _chunks(r))


def ttft(r: RequestRecord) -> float | None:
    ch = _chunks(r)
    if not ok(r) or not ch:
        return None
    return ch[0][0] - r.sent


def e2e(r: RequestRecord) -> float | None:
    if not ok(r):
        return None
    ch = _chunks(r)
    last = ch[-1][0] if ch else r.end
    return None if last is None else last - r.sent


def tpot(r: RequestRecord) -> float | None:
    n, t0, t1 = num_output_tokens(r), ttft(r), e2e(r)
    if n <= 1 or t0 is None or t1 is None:
        return None
    return (t1 - t0) / (n - 1)


def itl_intervals(r: RequestRecord) -> list[float]:
    """Token-normalised inter-token intervals of one request (a k-token chunk gives k intervals)."""
    if not ok(r):
        return []
    ch = _chunks(r)
    out: list[float] = []
    for (ta, _), (tb, k) in zip(ch, ch[1:], strict=False):
        out.extend([(tb - ta) / k] * k)
    return out


def chunk_gaps(r: RequestRecord) -> list[float]:
    ch = _chunks(r) if ok(r) else []
    return [tb - ta for (ta, _), (tb, _) in zip(ch, ch[1:], strict=False)]


def request_itl(r: RequestRecord) -> float | None:
    xs = itl_intervals(r)
    return sum(xs) / len(xs) if xs else None


def dispatch_lag(r: RequestRecord) -> float | None:
    """Client-side lateness not explained by the concurrency cap: sent − scheduled − queue wait."""
    if r.scheduled is None:
        return None
    return max(0.0, r.sent - r.scheduled - r.queue_wait)


def meets_slo(r: RequestRecord, slo: SLO) -> bool:
    if not ok(r) or num_output_tokens(r) < 1:
        return False
    checks = (("ttft", slo.ttft_s, ttft(r)), ("tpot", slo.tpot_s, tpot(r)), ("e2e", slo.e2e_s, e2e(r)))
    for name, bound, value in checks:
        if bound is None:
            continue
        if value is None:
            if name == "tpot":  # TPOT undefined for one-token outputs: nothing to violate
                continue
            return False
        if value > bound:
            return False
    return True


def window(records: Sequence[RequestRecord]) -> float:
    """Measured window: earliest send to the latest byte (or chunk) of any request."""
    starts = [r.sent for r in records]
    ends = [t for r in records for t in ([r.end] if r.end is not None else []) + r.chunk_times[-1:]]
    if not starts or not ends:
        return 0.0
    return max(0.0, max(ends) - min(starts))


def summarize(records: Sequence[RequestRecord], slo: SLO | None = None,
              duration_s: float | None = None) -> Summary:
    """All run-level metrics; `duration_s` overrides the measured window (offline: wall time)."""
    good = [r for r in records if ok(r)]
    n, n_ok = len(records), len(good)
    dur = duration_s if duration_s is not None else window(records)
    out_tok = sum(num_output_tokens(r) for r in good)
    in_tok = sum(r.prompt_tokens for r in good)
    per = lambda x: x / dur if dur > 0 else 0.0
    s = Summary(
        num_requests=n, num_ok=n_ok, num_failed=n - n_ok, error_rate=(n - n_ok) / n if n else 0.0,
        duration_s=dur, input_tokens=in_tok, output_tokens=out_tok,
        request_throughput=per(n_ok), output_throughput=per(out_tok), total_throughput=per(in_tok + out_tok),
        ttft=stats(ttft(r) for r in good), tpot=stats(tpot(r) for r in good),
        itl=stats(request_itl(r) for r in good),
        itl_pooled=stats(x for r in good for x in itl_intervals(r)),
        chunk_gap=stats(x for r in good for x in chunk_gaps(r)),
        e2e=stats(e2e(r) for r in good),
        queue_wait=stats(r.queue_wait for r in records if r.scheduled is not None),
        dispatch_lag=stats(dispatch_lag(r) for r in records),
    )
    if slo is not None:
        n_good = sum(meets_slo(r, slo) for r in records)
        s.slo, s.goodput, s.good_fraction = slo, per(n_good), (n_good / n if n else 0.0)
        s.slo_pass = slo_pass(records, slo)
    return s


def slo_pass(records: Sequence[RequestRecord], slo: SLO) -> bool:
    """Run-level SLO: each bound holds at `slo.percentile` and the error rate is within limit."""
    if not records:
        return False
    good = [r for r in records if ok(r)]
    if (len(records) - len(good)) / len(records) > slo.max_error_rate or not good:
        return False
    if any(num_output_tokens(r) < 1 for r in good) and slo.ttft_s is not None:
        return False
    for bound, fn in ((slo.ttft_s, ttft), (slo.tpot_s, tpot), (slo.e2e_s, e2e)):
        if bound is None:
            continue
        p = percentile([v for v in (fn(r) for r in good) if v is not None], slo.percentile)
        if p is not None and p > bound:
            return False
    return True
