"""The `lpt` scheduling policy (engine/scheduler.py): waiting requests longest remaining output first, the running
set capped at ceil(remaining output / horizon), requests as long as the horizon due at once and those due soon with
them; through LLM, the same tokens as fcfs."""

import math

import pytest

from tachyon import LLM, SamplingParams
from tachyon.config import EngineConfig
from tachyon.engine.kv_cache import BlockPool, KVCacheManager
from tachyon.engine.request import Request, RequestStatus
from tachyon.engine.scheduler import LPT_DUE_SOON, Scheduler, remaining_output


def _scheduler(policy: str, blocks: int = 4096, budget: int = 8192, max_seqs: int = 512) -> Scheduler:
    return Scheduler(KVCacheManager(BlockPool(blocks, 16)), max_num_seqs=max_seqs, max_num_batched_tokens=budget,
                     policy=policy)


def _req(rid: str, max_tokens: int, prompt_len: int = 8) -> Request:
    return Request(rid, [3] * prompt_len, SamplingParams(max_tokens=max_tokens, ignore_eos=True), eos_token_ids=[],
                   max_model_len=4096, sample_seed=0)


def _waiting_output(s: Scheduler) -> int:
    return sum(remaining_output(r) for r in s.waiting)


def _decode(s: Scheduler, out) -> None:
    """What the engine does after a step: every scheduled request that reached its prompt's end samples a token,
    and requests at max_tokens finish."""
    for r, n in zip(out.requests, out.num_new_tokens):
        r.num_computed_tokens += n
        if r.num_computed_tokens >= r.num_tokens:
            r.append_token(7)
            if r.num_output_tokens >= r.max_tokens:
                s.finish(r, RequestStatus.FINISHED_LENGTH)


def _admission_order(policy: str, lens: list[int]) -> list[str]:
    """Request ids in the order a one-at-a-time scheduler first schedules them."""
    s = _scheduler(policy, max_seqs=1)
    for i, n in enumerate(lens):
        s.add(_req(str(i), n))
    order = []
    while s.num_unfinished:
        out = s.schedule()
        order += [r.request_id for r in out.requests if r.num_computed_tokens == 0]
        _decode(s, out)
    return order


def test_lpt_orders_waiting_by_remaining_output_ties_in_arrival_order():
    assert _admission_order("lpt", [5, 40, 12, 40, 3]) == ["1", "3", "2", "0", "4"]


def test_fcfs_keeps_arrival_order():
    assert _admission_order("fcfs", [5, 40, 12]) == ["0", "1", "2"]


def test_lpt_caps_running_at_remaining_output_over_horizon():
    s = _scheduler("lpt")
    lens = [100] + [10] * 30  # 400 output tokens; the longest needs 100 steps: 4 requests at a time suffice
    for i, n in enumerate(lens):
        s.add(_req(str(i), n))
    out = s.schedule()
    assert [r.request_id for r in out.requests] == ["0", "1", "2", "3"]
    assert len(s.running) == math.ceil(sum(lens) / max(lens))
    fcfs = _scheduler("fcfs")
    for i, n in enumerate(lens):
        fcfs.add(_req(str(i), n))
    assert len(fcfs.schedule().requests) == len(lens)  # fcfs admits everything the budget allows


def test_lpt_admits_a_request_as_long_as_the_horizon_above_the_cap():
    s = _scheduler("lpt")
    for rid, n in (("a", 50), ("b", 45), ("c", 45), ("d", 45)):
        s.add(_req(rid, n))
    for _ in range(40):  # all four run (cap ceil(185 / 50) = 4); then a has 10 tokens left, b-d 5 each
        _decode(s, s.schedule())
    assert [remaining_output(r) for r in s.running] == [10, 5, 5, 5]
    s.add(_req("due", 10))  # as long as the horizon: it cannot end sooner, so it is due although ...
    s.add(_req("short", 1))
    out = s.schedule()
    assert math.ceil((10 + 3 * 5 + 10 + 1) / 10) == 4  # ... the cap is 4 with 4 running
    assert [r.request_id for r in out.requests] == ["a", "b", "c", "d", "due"]  # "short" waits for a later step
    assert [r.request_id for r in s.waiting] == ["short"]


def test_lpt_admits_the_requests_due_soon_with_a_due_one():
    """Once one request is due, those at least LPT_DUE_SOON of the horizon long join it in the same step (one
    larger prefill step rather than one small one each); shorter ones wait for the cap."""
    assert LPT_DUE_SOON == 0.9
    s = _scheduler("lpt")
    for rid, n in (("a", 50), ("b", 45), ("c", 45), ("d", 45)):
        s.add(_req(rid, n))
    for _ in range(40):  # a has 10 tokens left, b-d 5 each: horizon 10
        _decode(s, s.schedule())
    for rid, n in (("due", 10), ("soon1", 9), ("soon2", 9), ("soon3", 9), ("later", 8)):
        s.add(_req(rid, n))
    cap = math.ceil((10 + 3 * 5 + 10 + 3 * 9 + 8) / 10)
    assert cap == 7  # the cap alone admits three of them
    out = s.schedule()
    assert [r.request_id for r in out.requests] == ["a", "b", "c", "d", "due", "soon1", "soon2", "soon3"]
    assert [r.request_id for r in s.waiting] == ["later"]  # 8 < 0.9 x 10


def test_lpt_flattens_the_batch_without_more_steps():
    """The workload's shape in miniature: lengths uniform in [10, 100]. lpt runs fewer requests at once, keeps the
    batch flatter and needs no more steps than the longest request does plus its own prefill."""
    lens = [10 + (i * 37) % 91 for i in range(64)]
    peaks, steps = {}, {}
    for policy in ("fcfs", "lpt"):
        s = _scheduler(policy)
        for i, n in enumerate(lens):
            s.add(_req(str(i), n))
        sizes = []
        while s.num_unfinished:
            out = s.schedule()
            sizes.append(len(out.requests))
            _decode(s, out)
            assert s._waiting_output == _waiting_output(s)
        peaks[policy], steps[policy] = max(sizes), len(sizes)
        s.kv.pool.check_integrity()
    assert peaks["fcfs"] == len(lens)
    assert peaks["lpt"] <= math.ceil(sum(lens) / max(lens)) + 2 < peaks["fcfs"]
    assert steps["lpt"] <= max(lens) + 2


def test_lpt_bookkeeping_through_preemption_and_abort():
    s = _scheduler("lpt", blocks=6, budget=64)  # 96 slots: the running set outgrows the pool
    for i, n in enumerate([40, 40, 40, 30]):
        s.add(_req(str(i), n, prompt_len=16))
    preempted = 0
    for _ in range(300):
        if not s.num_unfinished:
            break
        out = s.schedule()
        preempted += len(out.preempted)
        if out.preempted:
            assert s.waiting[0] is out.preempted[-1]  # a preempted request goes back first
        _decode(s, out)
        assert s._waiting_output == _waiting_output(s)
        if s.waiting and s.num_unfinished == 3:
            s.finish(s.waiting[-1], RequestStatus.FINISHED_ABORTED)  # an abort of a waiting request
            assert s._waiting_output == _waiting_output(s)
    assert preempted > 0 and not s.num_unfinished
    s.kv.pool.check_integrity()


def test_policy_is_validated_and_fcfs_by_default(tiny_llama):
    with pytest.raises(ValueError, match="scheduling_policy"):
        EngineConfig(scheduling_policy="sjf")
    assert EngineConfig().scheduling_policy == "fcfs"
    assert LLM(tiny_llama, device="cpu", dtype="float32", max_model_len=256).engine.scheduler.policy == "fcfs"
    llm = LLM(tiny_llama, device="cpu", dtype="float32", max_model_len=256, scheduling_policy="lpt")
    assert llm.engine.scheduler.policy == "lpt"


def test_lpt_and_fcfs_give_the_same_greedy_tokens(tiny_llama):
    """The order of admission changes which requests share a step, never a request's tokens."""
    prompts = [[5 + i, 9, 11 + 2 * i, 4] * (1 + i % 3) for i in range(12)]
    params = [SamplingParams(temperature=0.0, max_tokens=2 + (i * 5) % 17, ignore_eos=True) for i in range(12)]
    got = {}
    for policy in ("fcfs", "lpt"):
        llm = LLM(tiny_llama, device="cpu", dtype="float32", max_model_len=256, scheduling_policy=policy)
        got[policy] = [o.outputs[0].token_ids for o in llm.generate(prompts, params, use_tqdm=False)]
        llm.engine.check_integrity()
    assert [len(t) for t in got["lpt"]] == [p.max_tokens for p in params]
    assert got["lpt"] == got["fcfs"]


def test_due_soon_knob(monkeypatch):
    monkeypatch.setenv("TACHYON_LPT_DUE_SOON", "0.75")
    assert _scheduler("lpt").due_soon == 0.75
    monkeypatch.setenv("TACHYON_LPT_DUE_SOON", "1.5")
    with pytest.raises(ValueError, match="TACHYON_LPT_DUE_SOON"):
        _scheduler("lpt")
