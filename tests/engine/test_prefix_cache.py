"""Prefix caching (engine/kv_cache.py): the pool's three block states, and an engine that shares cached leading
blocks gives the tokens of one that recomputes them (greedy and seeded, with preemption, eviction and launched
steps), while really skipping the shared tokens."""

import random

import pytest

from tachyon import LLM, SamplingParams
from tachyon.engine.kv_cache import BlockPool


def test_pool_free_cached_and_in_use_blocks():
    pool = BlockPool(4, block_size=2)
    a, b = pool.allocate(2)
    pool.register(a, 11, (1, 2))
    pool.register(b, 11, (3, 4))  # a hash already held: b stays unhashed
    assert pool.lookup(11, (1, 2)) == a and pool.lookup(11, (3, 4)) is None and pool.lookup(12, (1, 2)) is None
    pool.free([a, b])
    assert pool.num_cached == 1 and pool.num_free == 4 and pool.is_cached(a) and not pool.is_cached(b)
    pool.check_integrity()
    pool.share(a)  # back into use from the cache
    assert pool.num_cached == 0 and pool.num_free == 3 and pool.lookup(11, (1, 2)) == a
    pool.share(a)
    pool.free([a])
    pool.free([a])
    c = pool.allocate(1)[0]
    pool.register(c, 12, (5, 6))
    pool.free([c])  # cached after a: evicted after it
    got = pool.allocate(3)  # the free blocks first, then the oldest cached one
    assert a in got and c not in got and pool.num_evictions == 1 and pool.lookup(11, (1, 2)) is None
    assert pool.lookup(12, (5, 6)) == c
    pool.check_integrity()
    with pytest.raises(RuntimeError, match="double free"):
        pool.free([c])


def test_pool_evicts_every_cached_block_and_keeps_those_in_use():
    pool = BlockPool(4, block_size=2)
    a, b, c = pool.allocate(3)
    for blk, h in ((a, 1), (b, 2), (c, 3)):
        pool.register(blk, h, (h, h))
    pool.free([a, b])
    assert pool.evict_cached() == 2 and pool.evict_cached() == 0
    assert pool.num_cached == 0 and pool.num_free == 3 and pool.num_evictions == 0
    assert pool.lookup(1, (1, 1)) is None and pool.lookup(2, (2, 2)) is None and pool.lookup(3, (3, 3)) == c
    pool.check_integrity()
    pool.free([c])  # still hashed: cached when freed
    assert pool.is_cached(c)
    pool.check_integrity()


def _prompts(n: int, shared: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    head = [rng.randrange(3, 1000) for _ in range(shared)]
    return [head + [rng.randrange(3, 1000) for _ in range(rng.randint(1, 12))] for _ in range(n)]


def _engine(tiny_llama, caching: bool, **kw) -> LLM:
    kw = {"max_model_len": 128, **kw}
    return LLM(tiny_llama, device="cpu", dtype="float32", block_size=4, enable_prefix_caching=caching, **kw)


def _run(llm: LLM, prompts, sp):
    return llm.generate(prompts, sp, use_tqdm=False)


@pytest.mark.parametrize("sp", [SamplingParams(temperature=0, max_tokens=12, ignore_eos=True),
                                SamplingParams(temperature=1.0, top_p=0.9, seed=5, max_tokens=12, ignore_eos=True)])
def test_shared_prefixes_give_the_same_tokens(tiny_llama, sp):
    """A batch whose prompts share a 23-token head, then the same prompts again and new ones with that head: the
    cached engine's tokens equal the recomputing engine's; the later requests report their shared tokens (whole
    blocks, the last known token always computed) and the pool stays consistent."""
    prompts = _prompts(6, shared=23, seed=1)
    on, off = _engine(tiny_llama, True), _engine(tiny_llama, False)
    first = _run(on, prompts[:3], sp)
    assert [o.outputs[0].token_ids for o in first] == [o.outputs[0].token_ids for o in _run(off, prompts[:3], sp)]
    again = _run(on, prompts, sp)
    assert [o.outputs[0].token_ids for o in again] == [o.outputs[0].token_ids for o in _run(off, prompts, sp)]
    for p, o in zip(prompts, again):
        assert o.num_cached_tokens >= 20 and o.num_cached_tokens % 4 == 0 and o.num_cached_tokens < len(p)
    for p, o in zip(prompts[:3], again[:3]):  # seen before whole: every full block but the last token's
        assert o.num_cached_tokens == (len(p) - 1) // 4 * 4
    assert all(o.num_cached_tokens == 0 for o in _run(off, prompts[:1], sp))
    kv = on.engine.scheduler.kv
    assert kv.num_prefix_hit_tokens >= sum(o.num_cached_tokens for o in again)
    on.engine.check_integrity()
    assert on.engine.pool.num_cached > 0


def test_a_whole_prompt_and_its_outputs_are_shared_on_the_next_turn(tiny_llama):
    """A follow-up turn (prompt + answer + more) reuses the blocks of the answer too: generated tokens are cached
    as their blocks fill."""
    on, off = _engine(tiny_llama, True), _engine(tiny_llama, False)
    sp = SamplingParams(temperature=0, max_tokens=10, ignore_eos=True)
    p = _prompts(1, shared=9, seed=2)[0]
    turn1 = _run(on, [p], sp)[0].outputs[0].token_ids
    follow = p + turn1 + [7, 8, 9]
    out = _run(on, [follow], sp)[0]
    assert out.num_cached_tokens >= (len(p) + len(turn1) - 1) // 4 * 4
    assert out.outputs[0].token_ids == _run(off, [follow], sp)[0].outputs[0].token_ids


@pytest.mark.parametrize("overlap", [False, True])
def test_eviction_and_preemption_keep_the_tokens(tiny_llama, overlap):
    """A cache of 24 blocks for 10 prompts sharing heads in two families: blocks are evicted, requests preempted
    and recomputed from what is still cached, steps launched or not; the tokens equal a roomy recomputing
    engine's and the pool stays consistent."""
    prompts = _prompts(5, shared=14, seed=3) + _prompts(5, shared=10, seed=4)
    sp = SamplingParams(temperature=1.0, seed=9, max_tokens=14, ignore_eos=True)
    tight = _engine(tiny_llama, True, num_kv_blocks=24, max_model_len=64, overlap_scheduling=overlap)
    ref = [o.outputs[0].token_ids for o in _run(_engine(tiny_llama, False), prompts, sp)]
    for _ in range(2):
        assert [o.outputs[0].token_ids for o in _run(tight, prompts, sp)] == ref
        tight.engine.check_integrity()
    assert tight.engine.pool.num_evictions > 0 and tight.engine.scheduler.num_preemptions > 0
    assert tight.engine.scheduler.kv.num_prefix_hit_tokens > 0


def test_prompt_logprobs_requests_compute_their_whole_prompt(tiny_llama):
    """A request asking for prompt logprobs needs every prompt position's logits: it shares nothing, and its prompt
    logprobs equal the recomputing engine's."""
    on, off = _engine(tiny_llama, True), _engine(tiny_llama, False)
    p = _prompts(1, shared=17, seed=5)[0]
    sp = SamplingParams(temperature=0, max_tokens=2, prompt_logprobs=1)
    _run(on, [p], SamplingParams(temperature=0, max_tokens=2))
    got, want = _run(on, [p], sp)[0], _run(off, [p], sp)[0]
    assert got.num_cached_tokens == 0
    assert [d and sorted(d) for d in got.prompt_logprobs] == [d and sorted(d) for d in want.prompt_logprobs]


@pytest.mark.parametrize("policy", ["lpt", "flat"])
def test_other_admission_orders_share_prefixes_too(tiny_llama, policy):
    """lpt and flat admit by remaining output and fill steps with prompt chunks: with caching their tokens equal
    the recomputing engine's, and the second round shares the heads."""
    prompts = _prompts(6, shared=18, seed=6)
    sps = [SamplingParams(temperature=0, max_tokens=4 + 3 * i, ignore_eos=True) for i in range(6)]
    on = _engine(tiny_llama, True, scheduling_policy=policy, max_num_batched_tokens=32)
    off = _engine(tiny_llama, False, scheduling_policy=policy, max_num_batched_tokens=32)
    want = [o.outputs[0].token_ids for o in _run(off, prompts, sps)]
    for _ in range(2):
        got = _run(on, prompts, sps)
        assert [o.outputs[0].token_ids for o in got] == want
    assert all(o.num_cached_tokens >= 16 for o in got)
    on.engine.check_integrity()


def test_greedy_after_a_cache_hit_equals_transformers(tiny_llama):
    """The independent oracle: a prompt whose head another request cached decodes, greedy, to transformers'
    generate tokens for the whole prompt."""
    import torch

    from tests.hf_oracle import hf_model

    on = _engine(tiny_llama, True)
    a, b = _prompts(2, shared=21, seed=7)
    sp = SamplingParams(temperature=0, max_tokens=10, ignore_eos=True)
    _run(on, [a], sp)
    out = _run(on, [b], sp)[0]
    assert out.num_cached_tokens == 20
    ids = torch.tensor([b])
    with torch.no_grad():
        want = hf_model(tiny_llama).generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                             max_new_tokens=10, pad_token_id=0)[0, len(b):].tolist()
    assert out.outputs[0].token_ids == want


@pytest.mark.parametrize("overlap,budget", [(False, 8), (True, 8), (False, 256)])
def test_a_burst_sharing_a_head_computes_it_once(tiny_llama, overlap, budget):
    """Eight requests sharing a 23-token head arrive together in a fresh engine: the first computes the head
    (over several steps under an 8-token budget, which leaves no room for the others meanwhile; in one step under
    256, where the others are held back), the others share its blocks (5 blocks, 20 tokens each), and the tokens
    equal the recomputing engine's."""
    prompts = _prompts(8, shared=23, seed=8)
    sp = SamplingParams(temperature=1.0, top_p=0.9, seed=3, max_tokens=8, ignore_eos=True)
    on = _engine(tiny_llama, True, overlap_scheduling=overlap, max_num_batched_tokens=budget)
    off = _engine(tiny_llama, False, overlap_scheduling=overlap, max_num_batched_tokens=budget)
    got = _run(on, prompts, sp)
    assert [o.outputs[0].token_ids for o in got] == [o.outputs[0].token_ids for o in _run(off, prompts, sp)]
    assert sorted(o.num_cached_tokens for o in got) == [0] + [20] * 7
    assert (on.engine.scheduler.num_prefix_waits > 0) == (budget > 23)
    on.engine.check_integrity()


def test_a_request_held_back_for_a_prefix_goes_on_when_its_computer_is_aborted(tiny_llama):
    """A and B arrive together with a shared 30-token head: A computes it, B is held back for a step; A is aborted
    before B is admitted: B still shares the blocks A cached (7 blocks, 28 tokens) and decodes as the recomputing
    engine does."""
    on, off = _engine(tiny_llama, True, max_num_batched_tokens=64), _engine(tiny_llama, False)
    a, b = _prompts(2, shared=30, seed=9)
    sp = SamplingParams(temperature=0, max_tokens=6, ignore_eos=True)
    eng = on.engine
    eng.add_request("a", a, sp)
    eng.add_request("b", b, sp)
    eng.step()
    assert eng.scheduler.num_prefix_waits == 1 and [r.request_id for r in eng.scheduler.waiting] == ["b"]
    eng.abort("a")
    outs = {}
    while eng.has_unfinished():
        for o in eng.step():
            outs[o.request_id] = o
    assert outs["b"].outputs[0].token_ids == _run(off, [b], sp)[0].outputs[0].token_ids
    assert outs["b"].num_cached_tokens == 28
    eng.check_integrity()


def test_n_children_compute_their_prompt_once_without_prefix_caching(tiny_llama):
    """Prefix caching off: an n=4 request's children share their prompt's blocks with one another (one computes
    it, three wait a step and share its full blocks but the last token's), so greedy children equal a lone
    request; a later request with the same prompt, or another n>1 request, finds none of those blocks."""
    off = _engine(tiny_llama, False)
    kv = off.engine.scheduler.kv
    p = _prompts(1, shared=23, seed=10)[0]
    shared = (len(p) - 1) // 4 * 4
    greedy = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)
    alone = _run(off, [p], greedy)[0].outputs[0].token_ids
    out = _run(off, [p], greedy.clone(n=4))[0]
    assert [c.token_ids for c in out.outputs] == [alone] * 4
    assert shared >= 20 and kv.num_prefix_hit_tokens == 3 * shared and off.engine.scheduler.num_prefix_waits >= 3
    assert _run(off, [p], greedy)[0].num_cached_tokens == 0  # no sharing outside the group
    sampled = _run(off, [p], SamplingParams(temperature=1.0, seed=4, max_tokens=8, ignore_eos=True, n=3))[0]
    assert kv.num_prefix_hit_tokens == 5 * shared  # its own prompt again, computed once, not the first group's
    assert len({tuple(c.token_ids) for c in sampled.outputs}) == 3
    off.engine.check_integrity()


def test_reset_prefix_cache_forgets_earlier_prompts_but_not_running_ones(tiny_llama):
    """After `LLM.reset_prefix_cache()` a prompt seen before is computed whole (no cached tokens) with the same
    tokens; a reset while a request runs keeps its blocks findable, so a request with its prompt still shares them."""
    on = _engine(tiny_llama, True)
    p = _prompts(1, shared=23, seed=12)[0]
    sp = SamplingParams(temperature=0, max_tokens=6, ignore_eos=True)
    first = _run(on, [p], sp)[0]
    again = _run(on, [p], sp)[0]
    assert again.num_cached_tokens == (len(p) - 1) // 4 * 4 and on.engine.pool.num_cached > 0
    assert on.reset_prefix_cache() > 0 and on.engine.pool.num_cached == 0
    fresh = _run(on, [p], sp)[0]
    assert fresh.num_cached_tokens == 0
    assert first.outputs[0].token_ids == again.outputs[0].token_ids == fresh.outputs[0].token_ids
    eng = on.engine
    eng.add_request("a", p, sp)
    eng.step()  # a's prompt computed, its full blocks registered
    eng.reset_prefix_cache()
    eng.add_request("b", p, sp)
    outs = {}
    while eng.has_unfinished():
        for o in eng.step():
            outs[o.request_id] = o
    assert outs["b"].num_cached_tokens == (len(p) - 1) // 4 * 4
    assert outs["a"].outputs[0].token_ids == outs["b"].outputs[0].token_ids == first.outputs[0].token_ids
    eng.check_integrity()
