"""Prefill steps launched without waiting (overlap scheduling): the same draws as the synchronous engine,
and the steps whose sampling needs host-side work still run synchronously."""

import random

import pytest

from tachyon import LLM, SamplingParams
from tachyon.config import EngineConfig
from tachyon.engine import sampler


@pytest.fixture(scope="module")
def pair(tiny_qwen3):
    # no prefix caching: cases that repeat a prompt must run its prefill again (a prompt cached but its last token
    # is a one-token step, launched as a decode step)
    kw = dict(device="cpu", dtype="float32", max_model_len=128, block_size=4, enable_prefix_caching=False)
    over = LLM(tiny_qwen3, **kw, overlap_scheduling=True)
    sync = LLM(tiny_qwen3, **kw, overlap_scheduling=False)
    yield over, sync
    over.engine.check_integrity()
    sync.engine.check_integrity()


def _prompts(n: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(3, 1000) for _ in range(rng.randint(2, 30))] for _ in range(n)]


def _tokens(llm: LLM, prompts, sps) -> list[list[int]]:
    return [o.outputs[0].token_ids for o in llm.generate(prompts, sps, use_tqdm=False)]


def test_seeded_sampling_equals_synchronous_engine(pair):
    """Temperature, top-k, top-p and min-p draws (seeded per request) of a launched prefill and the decode steps
    fed from its device-side tokens equal the synchronous engine's, one request at a time and batched."""
    over, sync = pair
    prompts = _prompts(5, seed=1)
    sps = [SamplingParams(temperature=0.9, top_k=40 if i % 2 else 0, top_p=0.9, min_p=0.02 * i, seed=100 + i,
                          max_tokens=3 + i, ignore_eos=True) for i in range(5)]
    runner = over.engine.runner
    before = runner.num_prefills_launched
    assert _tokens(over, prompts[:1], sps[:1]) == _tokens(sync, prompts[:1], sps[:1])
    assert runner.num_prefills_launched - before == 1
    assert _tokens(over, prompts, sps) == _tokens(sync, prompts, sps)
    assert sync.engine.runner.num_prefills_launched == 0


@pytest.mark.parametrize("mode", ["all", "structured"])
@pytest.mark.parametrize("kw,redrawn", [(dict(logprobs=2), None), (dict(prompt_logprobs=1), None),
                                        (dict(repetition_penalty=1.3), True), (dict(min_tokens=2), True),
                                        (dict(logit_bias={77: 100.0}), True)])
def test_host_side_sampling_in_a_prefill(pair, monkeypatch, mode, kw, redrawn):
    """Prompt logprobs keep a prefill synchronous; logprobs are computed on the device by finish_launch, so such a
    prefill is launched. Logit biases, penalties and min_tokens bans launch it under sampler.LAUNCHED_REDRAWS "all"
    (the default: redrawn on the device) and keep it synchronous under "structured". Either way its tokens and
    logprobs equal the synchronous engine's."""
    monkeypatch.setattr(sampler, "LAUNCHED_REDRAWS", mode)
    launched = "logprobs" in kw if redrawn is None else mode == "all"
    over, sync = pair
    prompts = _prompts(2, seed=2)
    sp = SamplingParams(temperature=0, max_tokens=4, ignore_eos=True, **kw)
    before = over.engine.runner.num_prefills_launched
    got = [o.outputs[0] for o in over.generate(prompts, sp, use_tqdm=False)]
    want = [o.outputs[0] for o in sync.generate(prompts, sp, use_tqdm=False)]
    assert [c.token_ids for c in got] == [c.token_ids for c in want]
    assert (over.engine.runner.num_prefills_launched > before) == launched
    for g, w in zip(got, want):
        assert (g.logprobs is None) == (w.logprobs is None)
        assert g.logprobs is None or [sorted(d) for d in g.logprobs] == [sorted(d) for d in w.logprobs]


def test_partial_chunk_runs_synchronously(tiny_qwen3):
    """A chunk that stops short of its prompt's end draws no token, so its step is not launched; the last chunk
    is. A 20-token prompt under a 8-token budget: two synchronous chunks, then one launched."""
    llm = LLM(tiny_qwen3, device="cpu", dtype="float32", max_model_len=128, block_size=4, max_num_batched_tokens=8,
              overlap_scheduling=True)
    runner = llm.engine.runner
    prompt = _prompts(1, seed=3)[0][:2] * 10
    sp = SamplingParams(temperature=0, max_tokens=3, ignore_eos=True)
    got = _tokens(llm, [prompt], sp)
    assert runner.num_prefills_launched == 1
    llm.engine.overlap = False
    assert _tokens(llm, [prompt], sp) == got
    llm.engine.check_integrity()


def test_overlap_is_on_for_cuda_and_off_on_the_cpu_by_default(tiny_qwen3):
    """None (the default) picks by device: on the CPU a launched step runs to completion at launch, so overlap would
    only hand each token back one step late; an explicit value wins; anything else names the field."""
    assert EngineConfig().overlap_scheduling is None
    kw = dict(device="cpu", dtype="float32", max_model_len=64, block_size=4)
    assert LLM(tiny_qwen3, **kw).engine.overlap is False
    assert LLM(tiny_qwen3, **kw, overlap_scheduling=True).engine.overlap is True
    with pytest.raises(ValueError, match="overlap_scheduling"):
        EngineConfig(overlap_scheduling="yes")


@pytest.fixture(scope="module")
def llama_pair(tiny_llama):
    kw = dict(device="cpu", dtype="float32", max_model_len=256, block_size=4)
    over = LLM(tiny_llama, **kw, overlap_scheduling=True)
    sync = LLM(tiny_llama, **kw, overlap_scheduling=False)
    yield over, sync
    over.engine.check_integrity()
    sync.engine.check_integrity()


def test_structured_decode_rows_are_launched_and_redrawn(llama_pair, monkeypatch):
    """Decode steps holding structured-output rows are launched like any other (each such row is redrawn from its
    masked logits before the tokens reach the host, its matcher fed when they do): the tokens equal the synchronous
    engine's, sampled and greedy, batched with plain rows and alone, and the outputs keep to their grammars. Under
    sampler.LAUNCHED_REDRAWS "structured", a batch that also holds a biased, penalised or min_tokens row runs
    synchronously (sampler.redrawn_when_launched), with the same tokens as the synchronous engine. ("all", the
    default, launches those too: test_biased_and_penalised_rows_launched_when_asked. Not with these batches: the
    JSON row ends first, the launched step after it still runs three rows where the synchronous one runs two, and
    the biased row's logits then differ by ~1e-6, enough to flip a sampled near-tie at its 19th token.)"""
    import json

    from tachyon import StructuredOutputsParams

    over, sync = llama_pair
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 99},
                                               "w": {"enum": ["ab", "cd"]}},
              "required": ["n", "w"], "additionalProperties": False}
    base = dict(temperature=0.9, top_p=0.95, max_tokens=24)
    sps = [SamplingParams(**base, seed=1, ignore_eos=True),
           SamplingParams(**base, seed=5, structured_outputs=StructuredOutputsParams(json=schema)),
           SamplingParams(temperature=0, max_tokens=24, structured_outputs=StructuredOutputsParams(regex="[0-9]{3,9}")),
           SamplingParams(**base, seed=6, structured_outputs=StructuredOutputsParams(choice=["yes", "no way"]))]
    prompts = _prompts(len(sps), seed=9)
    runner = over.engine.runner
    launched, redrawn = runner.num_launched, runner.num_rows_redrawn
    got = [o.outputs[0] for o in over.generate(prompts, sps, use_tqdm=False)]
    want = [o.outputs[0] for o in sync.generate(prompts, sps, use_tqdm=False)]
    assert [c.token_ids for c in got] == [c.token_ids for c in want]
    assert runner.num_launched - launched >= 20
    assert runner.num_rows_redrawn - redrawn >= sum(len(c.token_ids) - 1 for c in got[1:])
    assert sync.engine.runner.num_rows_redrawn == 0
    assert got[1].finish_reason == "stop" and set(json.loads(got[1].text)) == {"n", "w"}
    assert got[2].text.isdigit() and 3 <= len(got[2].text) <= 9 and got[3].text in ("yes", "no way")
    for i in (1, 2):  # one at a time too (batch-1 launches)
        assert _tokens(over, [prompts[i]], sps[i]) == _tokens(sync, [prompts[i]], sps[i])

    others = [SamplingParams(**base, seed=2, ignore_eos=True, logit_bias={40: 4.0, 41: -100.0}),
              SamplingParams(**base, seed=3, ignore_eos=True, presence_penalty=0.6, repetition_penalty=1.3),
              SamplingParams(**base, seed=4, min_tokens=24)]
    monkeypatch.setattr(sampler, "LAUNCHED_REDRAWS", "structured")
    for extra in others:  # each outlives the others: no step of this batch is launched
        launched = runner.num_launched
        assert _tokens(over, prompts[:2] + prompts[3:4], sps[:2] + [extra]) == _tokens(
            sync, prompts[:2] + prompts[3:4], sps[:2] + [extra])
        assert runner.num_launched == launched, extra


def test_biased_and_penalised_rows_launched_when_asked(llama_pair, monkeypatch):
    """LAUNCHED_REDRAWS "all" (the default): decode steps holding logit-biased and penalised rows (repetition, presence,
    frequency; their counts stay on the device between launched steps, built from the host's tokens once) are
    launched and the rows redrawn, with the synchronous engine's tokens, beside structured and plain rows; so are
    rows under a min_tokens ban (stop tokens the free rows end on, held back until the 12th token)."""
    from tachyon import StructuredOutputsParams
    from tachyon.engine import sampler

    monkeypatch.setattr(sampler, "LAUNCHED_REDRAWS", "all")
    over, sync = llama_pair
    base = dict(temperature=0.9, top_p=0.95, max_tokens=20, ignore_eos=True)
    sps = [SamplingParams(**base, seed=2, logit_bias={40: 4.0, 41: -100.0}),
           SamplingParams(**base, seed=3, presence_penalty=0.6, repetition_penalty=1.3),
           SamplingParams(temperature=0, max_tokens=20, ignore_eos=True, frequency_penalty=0.9),
           SamplingParams(**base, seed=4),
           SamplingParams(temperature=0, max_tokens=20, structured_outputs=StructuredOutputsParams(regex="[a-z]{5,9}"))]
    prompts = _prompts(len(sps), seed=11)
    runner = over.engine.runner
    launched, redrawn = runner.num_launched, runner.num_rows_redrawn
    built = runner.sampler.penalties.num_rebuilt
    assert _tokens(over, prompts, sps) == _tokens(sync, prompts, sps)
    assert runner.num_launched - launched >= 15
    assert runner.num_rows_redrawn - redrawn >= 3 * 15
    assert runner.sampler.penalties.num_rebuilt - built == 2  # once per penalised request: then counted on device
    for i in (0, 1, 2):  # alone: batch-1 launches
        assert _tokens(over, [prompts[i]], sps[i]) == _tokens(sync, [prompts[i]], sps[i])
    plain = _tokens(sync, prompts[:1], [SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)])[0]
    stops = sorted(set(plain[1:11]))  # each would end a free row early
    banned = [SamplingParams(temperature=0, max_tokens=12, min_tokens=12, stop_token_ids=[t]) for t in stops]
    free = [SamplingParams(temperature=0, max_tokens=12, stop_token_ids=[t]) for t in stops]
    launched = runner.num_launched
    got = _tokens(over, prompts[:1] * len(stops), banned)
    assert got == _tokens(sync, prompts[:1] * len(stops), banned) and all(len(t) == 12 for t in got)
    assert runner.num_launched - launched >= 8
    assert all(len(t) < 12 for t in _tokens(sync, prompts[:1] * len(stops), free))  # the bans held them back


def test_logprob_rows_are_launched_with_the_synchronous_engines_logprobs(llama_pair):
    """Decode steps holding rows that ask for logprobs (top 0, 3 and 5; greedy, sampled and structured) are
    launched, their logprobs computed on the device beside the redraws: tokens, logprobs, ranks, top entries and
    cumulative logprobs equal the synchronous engine's; a plain row beside them reports none."""
    from tachyon import StructuredOutputsParams

    over, sync = llama_pair
    base = dict(max_tokens=16, ignore_eos=True)
    sps = [SamplingParams(temperature=0, logprobs=3, **base),
           SamplingParams(temperature=0.8, top_p=0.9, seed=2, logprobs=0, **base),
           SamplingParams(temperature=0.7, seed=3, **base),
           SamplingParams(temperature=0, logprobs=5, max_tokens=16,
                          structured_outputs=StructuredOutputsParams(regex="[a-z]{4,12}"))]
    prompts = _prompts(len(sps), seed=12)
    runner = over.engine.runner
    launched, rows = runner.num_launched, runner.num_logprob_rows_launched
    got = [o.outputs[0] for o in over.generate(prompts, sps, use_tqdm=False)]
    want = [o.outputs[0] for o in sync.generate(prompts, sps, use_tqdm=False)]
    assert runner.num_launched - launched >= 10 and runner.num_logprob_rows_launched - rows >= 3 * 10
    for g, w, sp in zip(got, want, sps):
        assert g.token_ids == w.token_ids
        if sp.logprobs is None:
            assert g.logprobs is None
            continue
        assert len(g.logprobs) == len(g.token_ids)
        for dg, dw, t in zip(g.logprobs, w.logprobs, g.token_ids):
            assert dg.keys() == dw.keys() and len(dg) in (sp.logprobs, sp.logprobs + 1) and t in dg
            for tok in dg:
                assert abs(dg[tok].logprob - dw[tok].logprob) < 1e-5
                # a rank moves only where the logprob did: a neighbour ~1e-6 away may swap places with it (fp32
                # sums of another batch shape; the tiny random model's near-uniform distribution)
                assert dg[tok].rank == dw[tok].rank or (dg[tok].logprob != dw[tok].logprob
                                                        and abs(dg[tok].rank - dw[tok].rank) == 1)
        assert abs(g.cumulative_logprob - w.cumulative_logprob) < 1e-4


def test_launched_tokens_reach_the_caller_before_a_synchronous_chunk(tiny_qwen3):
    """A running stream's token from a launched step is returned by the call that drains it, not held until the
    synchronous prompt-chunk step after it has run (a long prefill's whole step, on a GPU); the chunk runs at the
    next call. Checked at every synchronous step: the caller has already seen every token the engine drew. The
    tokens equal the synchronous engine's, and a request added between the two calls joins the steps after."""
    kw = dict(device="cpu", dtype="float32", max_model_len=128, block_size=4, max_num_batched_tokens=8,
              enable_prefix_caching=False)
    over, sync = LLM(tiny_qwen3, **kw, overlap_scheduling=True), LLM(tiny_qwen3, **kw, overlap_scheduling=False)
    eng = over.engine
    prompts = _prompts(3, seed=11)
    long_prompt = (prompts[1] * 10)[:27]  # four chunks under the 8-token budget, beside a decode row
    sp = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)
    seen: dict[str, int] = {}
    checked = []
    execute = eng.runner.execute

    def checked_execute(sched):
        if any(len(r.prompt_token_ids) < r.num_tokens for r in sched.requests):  # a stream is running
            drawn = {rid: g.children[0].num_output_tokens for rid, g in eng._groups.items()}
            assert all(seen.get(rid, 0) == n for rid, n in drawn.items()), (drawn, seen)
            checked.append(len(sched.requests))
        return execute(sched)

    eng.runner.execute = checked_execute
    eng.add_request("a", prompts[0], sp)
    for _ in range(3):  # a's prefill, then launched decode steps
        for o in eng.step():
            seen[o.request_id] = len(o.outputs[0].token_ids)
    eng.add_request("b", long_prompt, sp)
    got: dict[str, list[int]] = {}
    added_c = False
    while eng.has_unfinished():
        for o in eng.step():
            seen[o.request_id] = len(o.outputs[0].token_ids)
            if o.finished:
                got[o.request_id] = o.outputs[0].token_ids
        if eng._deferred is not None and not added_c:  # between a drained call and its held chunk step
            eng.add_request("c", prompts[2], sp)
            added_c = True
    assert added_c and len(checked) >= 3  # b's partial chunks ran synchronously beside a's decode row
    want = [o.outputs[0].token_ids for o in sync.generate([prompts[0], long_prompt, prompts[2]], sp, use_tqdm=False)]
    assert [got["a"], got["b"], got["c"]] == want
    eng.check_integrity()


def test_held_chunk_step_whose_requests_are_aborted_is_dropped(tiny_qwen3):
    """Aborting every request of a held synchronous step between the two calls drops that step: the next call
    schedules afresh, a request added meanwhile runs to the synchronous engine's tokens, and no block leaks."""
    kw = dict(device="cpu", dtype="float32", max_model_len=128, block_size=4, max_num_batched_tokens=8,
              enable_prefix_caching=False)
    over, sync = LLM(tiny_qwen3, **kw, overlap_scheduling=True), LLM(tiny_qwen3, **kw, overlap_scheduling=False)
    eng = over.engine
    prompts = _prompts(3, seed=12)
    sp = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)
    eng.add_request("a", prompts[0], sp)
    for _ in range(3):
        eng.step()
    eng.add_request("b", (prompts[1] * 10)[:27], sp)
    for _ in range(20):
        eng.step()
        if eng._deferred is not None:
            break
    assert eng._deferred is not None
    eng.abort("a")
    eng.abort("b")
    eng.add_request("c", prompts[2], sp)
    got = {}
    while eng.has_unfinished():
        for o in eng.step():
            if o.finished:
                got[o.request_id] = o.outputs[0].token_ids
    assert list(got) == ["c"]
    assert got["c"] == sync.generate([prompts[2]], sp, use_tqdm=False)[0].outputs[0].token_ids
    assert eng._deferred is None
    eng.check_integrity()
