"""Aborts, async streaming and the block-pool invariant."""

import asyncio
import time

import pytest

from tachyon import SamplingParams
from tachyon.engine.async_engine import AsyncEngine
from tachyon.engine.kv_cache import BlockPool


def test_block_pool_double_free_and_integrity():
    pool = BlockPool(8, 4)
    blocks = pool.allocate(3)
    assert pool.num_free == 5
    pool.check_integrity()
    pool.free(blocks)
    pool.check_integrity()
    with pytest.raises(RuntimeError, match="double free"):
        pool.free(blocks[:1])
    with pytest.raises(RuntimeError, match="cannot allocate"):
        pool.allocate(9)


def test_abort_mid_generation_frees_blocks(llm):
    eng = llm.engine
    sp = SamplingParams(temperature=0, max_tokens=50, ignore_eos=True)
    for i in range(4):
        eng.add_request(f"a{i}", [5 + i] * (10 + i), sp)
    for _ in range(3):
        eng.step()
    assert eng.pool.num_in_use > 0
    assert eng.abort("a1") and eng.abort("a2")
    assert not eng.abort("a2")  # idempotent
    eng.pool.check_integrity()
    while eng.has_unfinished():
        eng.step()
    eng.check_integrity()
    # abort of a request still waiting (never scheduled)
    eng.add_request("w", [7] * 5, sp)
    assert eng.abort("w")
    eng.check_integrity()


def test_abort_with_n_children(llm):
    eng = llm.engine
    eng.add_request("multi", [9] * 8, SamplingParams(n=3, temperature=1.0, max_tokens=40, ignore_eos=True))
    eng.step()
    eng.step()
    assert eng.abort("multi")
    eng.check_integrity()


def test_async_engine_stream_and_cancel(tiny_llama):
    from tachyon.config import EngineConfig

    eng = AsyncEngine(EngineConfig(model=tiny_llama, device="cpu", dtype="float32", max_model_len=256))

    async def run():
        sp = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)
        outs = [o async for o in eng.generate([5, 6, 7, 8], sp, "s1")]
        assert outs[-1].finished and len(outs[-1].outputs[0].token_ids) == 12
        lens = [len(o.outputs[0].token_ids) for o in outs]
        assert lens == sorted(lens)
        # leave a long stream after its first output: the request is aborted, blocks freed
        sp_long = SamplingParams(temperature=0, max_tokens=200, ignore_eos=True)
        async for _ in eng.generate([5, 6, 7], sp_long, "s2"):
            break
        for _ in range(100):
            await asyncio.sleep(0.01)
            if eng.stats().num_running == 0 and eng.stats().num_free_blocks == eng.stats().num_total_blocks:
                break
        assert eng.stats().num_running == 0
        eng.check_integrity()
        with pytest.raises(ValueError, match="prompt must not be empty"):
            async for _ in eng.generate([], sp, "bad"):
                pass
        # many concurrent streams
        results = await asyncio.gather(*[_collect(eng, [10 + i] * (3 + i), sp, f"c{i}") for i in range(10)])
        assert all(len(r.outputs[0].token_ids) == 12 for r in results)

    try:
        asyncio.run(run())
        eng.check_integrity()
        assert eng.is_healthy()
    finally:
        eng.shutdown()


async def _collect(eng, prompt, sp, rid):
    last = None
    async for o in eng.generate(prompt, sp, rid):
        last = o
    return last


@pytest.mark.parametrize("max_tokens", [1, 2, 5])
def test_overlap_launches_no_step_past_max_tokens(llm, max_tokens):
    """With overlap scheduling, a request whose last token by length is in flight is not scheduled again: the
    launched prefill draws token 1, then exactly max_tokens - 1 decode steps are launched, and the tokens equal
    the synchronous engine's (which never runs ahead)."""
    runner = llm.engine.runner
    sp = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
    before, prefills = runner.num_launched, runner.num_prefills_launched
    out = llm.generate([[11, 12, 13, 14]], sp, use_tqdm=False)[0].outputs[0]
    assert runner.num_launched - before == max_tokens - 1
    assert runner.num_prefills_launched - prefills == 1
    assert len(out.token_ids) == max_tokens and out.finish_reason == "length"
    llm.engine.overlap = False
    try:
        assert llm.generate([[11, 12, 13, 14]], sp, use_tqdm=False)[0].outputs[0].token_ids == out.token_ids
    finally:
        llm.engine.overlap = True


def test_overlap_batch_with_staggered_lengths(llm):
    """Requests ending by length at different steps leave the batch as their last tokens go out: the launched
    decode rows total sum(max_tokens - 1), and each output has its own length."""
    runner = llm.engine.runner
    lens = [3, 7, 1, 12]
    sps = [SamplingParams(temperature=0, max_tokens=n, ignore_eos=True) for n in lens]
    rows = []
    orig = runner._launch_decode

    def launch_decode(sched):
        rows.append(len(sched.requests))
        return orig(sched)

    runner._launch_decode = launch_decode
    try:
        outs = llm.generate([[20 + i] * (4 + i) for i in range(4)], sps, use_tqdm=False)
    finally:
        del runner._launch_decode
    assert [len(o.outputs[0].token_ids) for o in outs] == lens
    assert sum(rows) == sum(n - 1 for n in lens)


@pytest.mark.parametrize("fault", ["persistent", "device"])
def test_a_step_failure_that_persists_stops_the_engine(tiny_llama, monkeypatch, fault):
    """Every step raising: the requests fail with EngineStepError until MAX_FAILED_STEPS steps in a row have failed,
    then with EngineDeadError, and the engine reports unhealthy (so /health shows it) and refuses new requests. A CUDA
    error (not out-of-memory) stops it at the first failed step."""
    from tachyon.config import EngineConfig
    from tachyon.engine import async_engine
    from tachyon.engine.async_engine import EngineDeadError, EngineStepError

    eng = AsyncEngine(EngineConfig(model=tiny_llama, device="cpu", dtype="float32", max_model_len=256,
                                   overlap_scheduling=False))
    message = "a bug every step hits" if fault == "persistent" else "CUDA error: an illegal memory access"

    def broken(*args, **kwargs):
        raise RuntimeError(message)

    monkeypatch.setattr(eng.engine.runner, "execute", broken)
    sp = SamplingParams(temperature=0, max_tokens=4, ignore_eos=True)
    fails = async_engine.MAX_FAILED_STEPS if fault == "persistent" else 1

    async def run():
        for i in range(fails):
            assert eng.is_healthy()
            with pytest.raises(EngineDeadError if i == fails - 1 else EngineStepError):
                await _collect(eng, [5, 6, 7, 8], sp, f"r{i}")
        for _ in range(200):
            if not eng.is_healthy():
                break
            await asyncio.sleep(0.01)
        assert not eng.is_healthy()
        with pytest.raises(EngineDeadError):
            await _collect(eng, [5, 6, 7, 8], sp, "after")

    try:
        asyncio.run(run())
    finally:
        eng.shutdown()


@pytest.mark.parametrize("overlap", [False, True])
def test_a_failed_step_fails_its_requests_and_the_engine_goes_on(tiny_llama, monkeypatch, overlap):
    """A step that raises mid-way (after scheduling and block allocation) fails the requests in flight with
    EngineStepError, never a ValueError (the server would answer 400 "invalid request" to every one of them); the
    engine stays healthy, frees every block, and the next request's tokens equal a fresh run's."""
    from tachyon.config import EngineConfig
    from tachyon.engine.async_engine import EngineStepError

    eng = AsyncEngine(EngineConfig(model=tiny_llama, device="cpu", dtype="float32", max_model_len=256,
                                   overlap_scheduling=overlap))
    runner = eng.engine.runner
    armed = {"on": False, "failed_in": None}

    def failing(real):
        def run(sched, *args, **kwargs):
            # the first step that holds all four requests (they arrive over the engine thread's turns) raises
            if armed["on"] and len(sched.requests) == 4:
                armed["on"] = False
                armed["failed_in"] = real.__name__
                raise ValueError("a bug inside the step")
            return real(sched, *args, **kwargs)
        return run

    name = "launch" if overlap else "execute"  # overlapped: the first launched step of all four fails
    monkeypatch.setattr(runner, name, failing(getattr(runner, name)))
    sp = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)

    async def run():
        before = await _collect(eng, [5, 6, 7, 8], sp, "before")
        armed["on"] = True
        results = await asyncio.gather(*[_collect(eng, [10 + i] * 5, sp, f"f{i}") for i in range(4)],
                                       return_exceptions=True)
        assert all(isinstance(r, EngineStepError) and isinstance(r.__cause__, ValueError) for r in results), results
        assert armed["failed_in"] == name
        for _ in range(200):
            if eng.stats().num_running == 0 and eng.stats().num_free_blocks == eng.stats().num_total_blocks:
                break
            await asyncio.sleep(0.01)
        eng.check_integrity()
        assert eng.is_healthy()
        after = await _collect(eng, [5, 6, 7, 8], sp, "after")
        assert after.outputs[0].token_ids == before.outputs[0].token_ids

    try:
        asyncio.run(run())
    finally:
        eng.shutdown()


def test_async_engine_overlap_streams_beside_chunked_prompts(tiny_llama):
    """The server's path with overlap on and an 8-token step budget: long prompts arrive while short streams decode,
    so synchronous chunk steps are held behind launched ones (LLMEngine.step) and requests come and leave between
    the two calls. Every stream's tokens equal the synchronous offline engine's; one left early is aborted cleanly."""
    from tachyon import LLM
    from tachyon.config import EngineConfig

    kw = dict(model=tiny_llama, device="cpu", dtype="float32", max_model_len=256, max_num_batched_tokens=8,
              enable_prefix_caching=False)
    eng = AsyncEngine(EngineConfig(**kw, overlap_scheduling=True))
    held = []  # whether each step call ran a chunk step held by the call before
    take = eng.engine._take_deferred

    def spy():
        sched = take()
        held.append(sched is not None)
        return sched

    eng.engine._take_deferred = spy
    sync = LLM(tiny_llama, **{k: v for k, v in kw.items() if k != "model"}, overlap_scheduling=False)
    prompts = [[11, 12, 13], list(range(20, 57)), [14, 15], list(range(60, 90)), [16, 17, 18, 19]]
    sp = SamplingParams(temperature=0, max_tokens=10, ignore_eos=True)

    async def late(i):
        await asyncio.sleep(0.02 * i)
        return await _collect(eng, prompts[i], sp, f"r{i}")

    async def leaves_early():
        async for o in eng.generate(list(range(100, 140)), SamplingParams(max_tokens=50, ignore_eos=True), "gone"):
            if o.outputs[0].token_ids:
                break

    async def run():
        results = await asyncio.gather(*[late(i) for i in range(len(prompts))], leaves_early())
        return [r.outputs[0].token_ids for r in results[:-1]]

    try:
        got = asyncio.run(run())
        want = [o.outputs[0].token_ids for o in sync.generate(prompts, sp, use_tqdm=False)]
        assert got == want
        for _ in range(100):
            if eng.stats().num_running == 0:
                break
            time.sleep(0.01)
        eng.check_integrity()
        assert eng.is_healthy() and eng.engine.runner.num_launched > 0 and any(held)
    finally:
        eng.shutdown()
