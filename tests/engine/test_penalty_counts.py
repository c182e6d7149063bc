"""PenaltyCounts: token counts kept on the device between draws give, at every step, the penalties a fresh
computation from the host's tokens gives (the per-element formulas), while requests come, finish, wait
(preempted) and lose tokens; slots are reused, grown and rebuilt; and the engine's tokens under penalties do
not depend on preemption or overlap."""

import random

import torch

from tachyon import LLM, SamplingParams
from tachyon.engine.penalty_counts import MIN_CAPACITY, PenaltyCounts
from tachyon.engine.request import Request, RequestStatus

V = 50


def _req(i: int, rng: random.Random) -> Request:
    sp = SamplingParams(repetition_penalty=rng.choice([1.0, 1.4]), frequency_penalty=rng.choice([0.0, 0.3]),
                        presence_penalty=rng.choice([0.0, -0.6]) or 0.2)
    r = Request(f"r{i}", [rng.randrange(V) for _ in range(rng.randrange(1, 6))], sp, eos_token_ids=[0],
                max_model_len=500, sample_seed=i)
    r.status = RequestStatus.RUNNING
    return r


def _oracle(logits: torch.Tensor, reqs: list[Request]) -> torch.Tensor:
    out = logits.clone()
    for x, r in zip(out, reqs):
        p, outs = r.params, r.output_token_ids
        for t in set(r.token_ids):
            x[t] = x[t] / p.repetition_penalty if x[t] > 0 else x[t] * p.repetition_penalty
        for t in set(outs):
            x[t] = x[t] - p.frequency_penalty * outs.count(t) - p.presence_penalty
    return out


def test_counts_follow_the_history_through_arrivals_finishes_preemption_and_dropped_tokens():
    rng = random.Random(0)
    gen = torch.Generator().manual_seed(0)
    state = PenaltyCounts()
    live = [_req(i, rng) for i in range(5)]
    made, max_live = 5, 5
    for step in range(60):
        running = [r for r in live if r.status == RequestStatus.RUNNING]
        logits = torch.randn(len(running), V, generator=gen) * 2
        exp = _oracle(logits, running)
        got = logits.clone()
        picked = state.apply(got, list(range(len(running))), running)
        torch.testing.assert_close(got, exp, rtol=1e-5, atol=1e-5)
        tokens = torch.randint(0, V, (len(running),), generator=gen)
        tokens[0] = running[0].token_ids[-1]  # repeats: counts above one
        state.record(picked, tokens)
        for r, t in zip(running, tokens.tolist()):
            r.append_token(t)
        # the batch changes: finishes, arrivals, a preemption and its return, a token the host drops
        if step % 7 == 3:
            live[0].status = RequestStatus.FINISHED_LENGTH
            live = live[1:]
        if step % 5 == 0:
            k = rng.randrange(1, 4)
            live += [_req(made + j, rng) for j in range(k)]
            made += k
        if step % 9 == 4:
            running[-1].status = RequestStatus.PREEMPTED
        if step % 9 == 6:
            for r in live:
                if r.status == RequestStatus.PREEMPTED:
                    r.status = RequestStatus.RUNNING
        if step % 11 == 8:
            running[1].token_ids.pop()  # the device counted a token the host no longer has
        if len(live) > 12:
            for r in live[:4]:
                r.status = RequestStatus.FINISHED_STOPPED
            live = live[4:]
        max_live = max(max_live, len(live))
        state.check_integrity()
    assert state.num_rebuilt > made  # every arrival once, and the dropped tokens' slots again
    assert MIN_CAPACITY < state.capacity <= 2 * max_live  # grown, but finished / waiting slots were reused


def test_a_preempted_request_keeps_or_rebuilds_its_counts():
    """A waiting request's slot is taken only when another needs one; either way its next draw sees its whole
    history."""
    rng = random.Random(1)
    state = PenaltyCounts()
    reqs = [_req(i, rng) for i in range(MIN_CAPACITY)]
    for r in reqs:
        r.params = r.params.clone(frequency_penalty=0.5, presence_penalty=0.0)
    logits = torch.zeros(len(reqs), V)
    state.record(state.apply(logits.clone(), list(range(len(reqs))), reqs), torch.full((len(reqs),), 7))
    for r in reqs:
        r.append_token(7)
    waiting = reqs[0]
    waiting.status = RequestStatus.PREEMPTED
    newcomer = _req(99, rng)
    state.apply(torch.zeros(1, V), [0], [newcomer])  # the pool is full: the waiting request's slot goes
    assert state.capacity == MIN_CAPACITY and id(waiting) not in state._slot
    waiting.status = RequestStatus.RUNNING
    got = torch.zeros(1, V)
    state.apply(got, [0], [waiting])
    torch.testing.assert_close(got, _oracle(torch.zeros(1, V), [waiting]))
    assert got[0, 7] == -0.5


def _mixed_params():
    return [SamplingParams(temperature=0, repetition_penalty=1.3, max_tokens=20, ignore_eos=True),
            SamplingParams(temperature=0.9, seed=3, frequency_penalty=0.8, presence_penalty=0.4, max_tokens=22,
                           ignore_eos=True),
            SamplingParams(temperature=0, max_tokens=18, ignore_eos=True),
            SamplingParams(temperature=1.0, seed=4, repetition_penalty=0.9, presence_penalty=-0.5, top_k=20,
                           max_tokens=24, ignore_eos=True)]


def test_penalised_tokens_survive_preemption_and_overlap(tiny_llama):
    """Penalised requests (greedy and seeded) beside a plain one give the same tokens with a cache small enough
    to preempt them, and without overlapped steps, as with room to spare."""
    prompts = [[(7 * i + 3 * j) % 400 + 3 for j in range(18)] for i in range(6)]
    params = [_mixed_params()[i % 4] for i in range(6)]
    roomy = LLM(tiny_llama, device="cpu", dtype="float32", max_model_len=64)
    ref = [o.outputs[0].token_ids for o in roomy.generate(prompts, params, use_tqdm=False)]
    penalised = sum(p.repetition_penalty != 1.0 or p.presence_penalty != 0.0 for p in params)
    assert roomy.engine.runner.sampler.penalties.num_rebuilt == penalised  # built once each, then counted on device
    tight = LLM(tiny_llama, device="cpu", dtype="float32", max_model_len=64, num_kv_blocks=20, block_size=4)
    got = [o.outputs[0].token_ids for o in tight.generate(prompts, params, use_tqdm=False)]
    assert tight.engine.scheduler.num_preemptions > 0
    assert got == ref
    sync = LLM(tiny_llama, device="cpu", dtype="float32", max_model_len=64, overlap_scheduling=False)
    assert [o.outputs[0].token_ids for o in sync.generate(prompts, params, use_tqdm=False)] == ref
    plain = roomy.generate(prompts[:1], SamplingParams(temperature=0, max_tokens=20, ignore_eos=True),
                           use_tqdm=False)[0].outputs[0].token_ids
    assert ref[0] != plain  # the penalty moves the path
    tight.engine.check_integrity()


def test_counts_made_in_inference_mode_serve_calls_outside_it():
    """The engine samples under torch.inference_mode; a caller outside it (a benchmark, a test) uses the same
    counts."""
    rng = random.Random(2)
    state = PenaltyCounts()
    r = _req(0, rng)
    with torch.inference_mode():
        state.record(state.apply(torch.zeros(1, V), [0], [r]), torch.tensor([3]))
    r.append_token(3)
    got = torch.zeros(1, V)
    state.record(state.apply(got, [0], [r]), torch.tensor([3]))
    torch.testing.assert_close(got, _oracle(torch.zeros(1, V), [r]))
    assert state.num_rebuilt == 1
