"""arrivals_probe.drive: a request's TTFT runs from its scheduled arrival, so the wait for the step in flight when it
arrives is counted (before stop 65 it was not, and the probe's engine-alone TTFT read one step short)."""

import time
from types import SimpleNamespace

import pytest

from benchmarks.gpu.arrivals_probe import drive
from tachyon import SamplingParams

STEP_S = 0.05


class _StepEngine:
    """Each step takes STEP_S and gives every request added before it its one and only token, stamped (as the
    engine's first-token time) half-way through the step: the probe's TTFT must run to the step's return."""

    def __init__(self):
        self.arrival: dict[str, float] = {}
        self.pending: list[str] = []

    def add_request(self, rid, prompt, params, *, arrival_time):
        self.arrival[rid] = arrival_time
        self.pending.append(rid)

    def has_unfinished(self):
        return bool(self.pending)

    def step(self, finished_only=False):
        batch, self.pending = self.pending, []
        time.sleep(STEP_S / 2)
        now = time.time()
        time.sleep(STEP_S / 2)
        return [SimpleNamespace(request_id=rid, finished=True, outputs=[SimpleNamespace(token_ids=[7])],
                                metrics=SimpleNamespace(arrival_time=self.arrival[rid], first_token_time=now,
                                                        finished_time=now)) for rid in batch]


def test_arrival_during_a_step_waits_for_it():
    eng = _StepEngine()
    params = [SamplingParams(max_tokens=1)] * 3
    rows, wall = drive(eng, [[1, 2]] * 3, params, [0.0, 0.02, 0.3], long_ids={"a2"})
    assert len(rows) == 3 and wall >= 0.3 + STEP_S
    # stamped with the scheduled arrival times, not when the loop got to them
    assert eng.arrival["a1"] - eng.arrival["a0"] == pytest.approx(0.02, abs=1e-6)
    assert eng.arrival["a2"] - eng.arrival["a0"] == pytest.approx(0.3, abs=1e-6)
    a0, a1, a2 = rows  # a1 arrived 20 ms into a0's step: it waits out the rest of it, then its own step
    assert a0["ttft"] >= STEP_S
    assert a1["ttft"] >= 2 * STEP_S - 0.02
    assert a2["ttft"] >= STEP_S and a2["long"] and not a1["long"]
    assert all(r["ttft"] - r["ttft_engine"] >= STEP_S / 2 for r in rows)  # the engine's stamp, half a step earlier


def test_logged_arrivals_read_by_request_id(tmp_path):
    import gzip
    import json

    from benchmarks.gpu.arrivals_probe import _logged_arrivals

    log = tmp_path / "run.requests.jsonl.gz"
    with gzip.open(log, "wt") as fh:
        for rid, t, p in (("1", 0.5, 20), ("0", 0.0, 10), ("2", 0.75, 30)):
            fh.write(json.dumps({"id": rid, "scheduled": t, "sent": t + 1e-4, "prompt_tokens": p}) + "\n")
    assert _logged_arrivals(str(log), [10, 20, 30]) == [0.0, 0.5, 0.75]
    with pytest.raises(SystemExit, match="lacks request ids"):
        _logged_arrivals(str(log), [10, 20, 30, 40])
    with pytest.raises(SystemExit, match="request 1 has 20 prompt tokens"):
        _logged_arrivals(str(log), [10, 21, 30])
