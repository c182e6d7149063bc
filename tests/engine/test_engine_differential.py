"""Differential test of the engine's options against each other: random requests (logit biases, penalties,
min_tokens bans, stop tokens, logprobs, structured outputs, n = 2) arriving over the steps, some aborted, run by
an engine with options that change *how* tokens are computed and by a plain synchronous one. A request's tokens and
logprobs depend only on it (the sampler's contract), so the two agree on every request neither aborted; both pools
end whole.

Two sets of options. Overlapped steps, every redraw launched and a small running set change no request's
arithmetic: seeded top-p sampling is compared too. Prefix caching, a KV cache small enough to preempt and an
8-token budget that chunks prompts change its fp32 rounding (a chunk's attention over cached keys, a shared
prefix's KV): the random tiny model's next-token distributions are nearly flat over ~40K tokens, so a sampled
top-p draw there can turn on a 1e-7 difference (a near-tie reordered in the sort); those runs are greedy, which
the same rounding does not move."""

import random

import pytest

from tachyon import LLM, SamplingParams, StructuredOutputsParams
from tachyon.engine import sampler

SCHEMA = {"type": "object", "properties": {"k": {"type": "integer", "minimum": 0, "maximum": 999}},
          "required": ["k"], "additionalProperties": False}


def _params(rng: random.Random, i: int, greedy: bool) -> SamplingParams:
    kw: dict = dict(max_tokens=rng.randint(3, 14), seed=1000 + i)
    kw["temperature"] = 0.0 if greedy else rng.choice([0.0, 0.7, 1.0])
    if rng.random() < 0.4 and not greedy:
        kw["top_p"] = rng.choice([0.8, 0.95])
    extra = rng.choice(["plain", "bias", "penalty", "min_tokens", "stop", "logprobs", "json", "regex", "n2"])
    if extra == "bias":
        kw["logit_bias"] = {rng.randrange(3, 500): rng.choice([-100.0, 3.0]) for _ in range(3)}
    elif extra == "penalty":
        kw.update(presence_penalty=rng.choice([0.0, 0.5]), frequency_penalty=0.4, repetition_penalty=1.2)
    elif extra == "min_tokens":
        kw["min_tokens"] = kw["max_tokens"]
        kw["stop_token_ids"] = [rng.randrange(3, 500) for _ in range(20)]
    elif extra == "stop":
        kw["stop_token_ids"] = [rng.randrange(3, 500) for _ in range(30)]
    elif extra == "logprobs":
        kw["logprobs"] = rng.choice([0, 2])
    elif extra == "json":
        kw.update(structured_outputs=StructuredOutputsParams(json=SCHEMA), max_tokens=24)
    elif extra == "regex":
        kw["structured_outputs"] = StructuredOutputsParams(regex="[a-z]{2,6}-[0-9]{1,3}")
    elif extra == "n2":
        kw["n"] = 2
    if "structured_outputs" not in kw and "min_tokens" not in kw:
        kw["ignore_eos"] = rng.random() < 0.7
    return SamplingParams(**kw)


def _run(llm: LLM, arrivals: dict[int, list[tuple[str, list[int], SamplingParams]]], aborts: dict[int, list[str]]):
    """Feed the requests at their steps, abort at theirs, run to the end: request id -> (token ids, logprobs) per
    completion."""
    eng, done, step = llm.engine, {}, 0
    while step <= max(arrivals) or eng.has_unfinished():
        for rid, prompt, sp in arrivals.get(step, []):
            eng.add_request(rid, prompt, sp)
        for rid in aborts.get(step, []):
            eng.abort(rid)
        for out in eng.step():
            if out.finished:
                done[out.request_id] = [(list(c.token_ids), c.logprobs, c.finish_reason) for c in out.outputs]
        step += 1
        assert step < 2000, "the engine made no progress"
    eng.check_integrity()
    return done


BUSY = dict(overlap_scheduling=True, max_num_seqs=5)  # the same arithmetic per request as the plain engine
TIGHT = dict(overlap_scheduling=True, enable_prefix_caching=True, num_kv_blocks=20, max_num_batched_tokens=8,
             max_num_seqs=5)  # other fp32 rounding (chunks, shared prefixes, recomputed KV)


@pytest.mark.parametrize("options", ["busy", "tight"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_option_gives_the_plain_engines_tokens(tiny_llama, monkeypatch, seed, options):
    monkeypatch.setattr(sampler, "LAUNCHED_REDRAWS", "all")
    rng = random.Random(seed)
    head = [rng.randrange(3, 900) for _ in range(13)]  # a shared head: the prefix cache has something to share
    arrivals: dict[int, list] = {}
    for i in range(14):
        own = [rng.randrange(3, 900) for _ in range(rng.randint(1, 20))]
        prompt = head + own if rng.random() < 0.6 else own
        arrivals.setdefault(rng.choice([0, 0, 0, 1, 2, 4, 7, 11]), []).append(
            (f"r{i}", prompt, _params(rng, i, greedy=options == "tight")))
    aborted = {f"r{i}" for i in rng.sample(range(14), 2)}
    aborts = {3: sorted(aborted)}
    kw = dict(device="cpu", dtype="float32", max_model_len=64, block_size=4)
    busy = LLM(tiny_llama, **kw, **(BUSY if options == "busy" else TIGHT))
    plain = LLM(tiny_llama, **kw, overlap_scheduling=False)
    got, want = _run(busy, arrivals, aborts), _run(plain, arrivals, aborts)
    for rid in sorted(set(want) - aborted):
        assert got[rid] == want[rid] or _close(got[rid], want[rid]), rid
    runner = busy.engine.runner
    assert runner.num_launched > 0 and (runner.num_rows_redrawn > 0 or runner.num_logprob_rows_launched > 0)
    if options == "tight":
        assert busy.engine.scheduler.num_preemptions > 0 and busy.engine.scheduler.kv.num_prefix_hit_tokens > 0


def _close(a, b) -> bool:
    """Equal tokens and finish reasons; logprobs equal to 1e-5 (the same float ops, in another batch shape)."""
    if len(a) != len(b):
        return False
    for (ta, la, fa), (tb, lb, fb) in zip(a, b):
        if ta != tb or fa != fb or (la is None) != (lb is None):
            return False
        for da, db in zip(la or [], lb or []):
            if da.keys() != db.keys() or any(abs(da[t].logprob - db[t].logprob) > 1e-5 for t in da):
                return False
    return True
