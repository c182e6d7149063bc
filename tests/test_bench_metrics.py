"""Metric definitions on hand-made traces with known answers (shared/BENCHMARKS.md)."""

import math

import pytest

from tachyon.bench import metrics as M
from tachyon.bench.schema import RequestRecord


def rec(rid, sent, chunks=(), end=None, n=None, error=None, prompt=10, scheduled=None, queue_wait=0.0):
    return RequestRecord(id=rid, prompt_tokens=prompt, sent=sent, chunk_times=[t for t, _ in chunks],
                         chunk_tokens=[k for _, k in chunks], end=end, output_tokens=n, error=error,
                         scheduled=scheduled, queue_wait=queue_wait)


SINGLE = rec("a", 0.0, [(0.5, 1), (0.6, 1), (0.7, 1), (0.8, 1)], end=0.85)
MULTI = rec("b", 1.0, [(1.2, 1), (1.5, 3), (1.6, 2)], end=1.65, n=6)
FAILED = rec("c", 0.0, [], end=0.1, error="HTTP 500: boom")
NO_TOKEN = rec("d", 0.0, [], end=0.3, n=0)
ONE = rec("e", 0.0, [(0.4, 1)], end=0.45, n=1)


def close(a, b):
    return a is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def test_single_token_chunks():
    assert close(M.ttft(SINGLE), 0.5)
    assert close(M.e2e(SINGLE), 0.8)
    assert close(M.tpot(SINGLE), 0.1)  # (0.8 - 0.5) / (4 - 1)
    assert all(close(x, 0.1) for x in M.itl_intervals(SINGLE))
    assert M.num_output_tokens(SINGLE) == 4


def test_multi_token_chunks():
    assert close(M.ttft(MULTI), 0.2)
    assert close(M.e2e(MULTI), 0.6)
    assert close(M.tpot(MULTI), 0.08)  # (0.6 - 0.2) / (6 - 1): first token excluded
    iv = M.itl_intervals(MULTI)  # 0.3 s for 3 tokens, then 0.1 s for 2 tokens
    assert len(iv) == 5 and all(close(a, b) for a, b in zip(iv, [0.1, 0.1, 0.1, 0.05, 0.05], strict=True))
    assert close(M.request_itl(MULTI), 0.08)
    assert [round(g, 9) for g in M.chunk_gaps(MULTI)] == [0.3, 0.1]  # chunk-weighted view differs


def test_failed_and_empty_requests():
    assert M.ttft(FAILED) is None and M.e2e(FAILED) is None and M.tpot(FAILED) is None
    assert M.itl_intervals(FAILED) == []
    assert M.ttft(NO_TOKEN) is None and M.tpot(NO_TOKEN) is None
    assert close(M.e2e(NO_TOKEN), 0.3)
    assert M.tpot(ONE) is None and close(M.ttft(ONE), 0.4)  # undefined for N <= 1


def test_summary_window_throughput_errors():
    s = M.summarize([SINGLE, MULTI, FAILED, NO_TOKEN])
    assert (s.num_requests, s.num_ok, s.num_failed) == (4, 3, 1)
    assert close(s.error_rate, 0.25)
    assert close(s.duration_s, 1.65)  # first send 0.0 -> last byte 1.65
    assert s.output_tokens == 10 and s.input_tokens == 30
    assert close(s.output_throughput, 10 / 1.65)
    assert close(s.request_throughput, 3 / 1.65)
    assert close(s.total_throughput, 40 / 1.65)
    assert s.ttft.n == 2 and close(s.ttft.mean, 0.35)
    assert s.tpot.n == 2 and close(s.tpot.mean, 0.09)
    assert s.itl_pooled.n == 8 and close(s.itl_pooled.mean, (0.3 + 0.4) / 8)
    assert s.itl.n == 2 and close(s.itl.mean, 0.09)
    assert s.e2e.n == 3 and close(s.e2e.max, 0.8)


def test_percentiles_match_numpy_linear():
    xs = [1.0, 2.0, 3.0, 4.0]
    st = M.stats(xs)
    assert close(st.p50, 2.5) and close(st.p90, 3.7) and close(st.p99, 3.97) and close(st.mean, 2.5)
    assert M.stats([]).n == 0 and M.stats([]).p99 is None
    assert close(M.percentile([5.0], 99), 5.0)


def test_goodput_and_slo():
    slo = M.make_slo(ttft_ms=300, tpot_ms=90)
    assert not M.meets_slo(SINGLE, slo)  # TTFT 0.5 s
    assert M.meets_slo(MULTI, slo)
    assert not M.meets_slo(FAILED, slo) and not M.meets_slo(NO_TOKEN, slo)
    assert M.meets_slo(rec("f", 0.0, [(0.1, 1)], n=1), slo)  # TPOT undefined: nothing to violate
    s = M.summarize([SINGLE, MULTI, FAILED, NO_TOKEN], slo)
    assert close(s.goodput, 1 / 1.65) and close(s.good_fraction, 0.25)
    assert s.slo_pass is False
    lax = M.make_slo(ttft_ms=1000, tpot_ms=200, max_error_rate=0.5)
    assert M.summarize([SINGLE, MULTI, FAILED], lax).slo_pass is True
    assert M.summarize([SINGLE, MULTI, FAILED], M.make_slo(ttft_ms=1000, tpot_ms=200)).slo_pass is False


def test_slo_presets():
    a = M.make_slo("mlperf-server")
    assert (a.ttft_s, a.tpot_s, a.percentile) == (2.0, 0.1, 99.0)
    b = M.make_slo("interactive")
    assert (b.ttft_s, b.tpot_s) == (0.5, 0.03)
    c = M.make_slo("interactive", e2e_ms=5000)
    assert c.e2e_s == 5.0 and c.name == "custom"
    assert M.make_slo() is None
    with pytest.raises(ValueError):
        M.make_slo("nope")


def test_dispatch_lag_excludes_cap_wait():
    r = rec("g", 1.30, [(1.4, 1)], n=1, scheduled=1.0, queue_wait=0.25)
    assert close(M.dispatch_lag(r), 0.05)
