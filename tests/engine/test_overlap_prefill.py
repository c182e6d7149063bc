"""Prefill steps launched without waiting (overlap scheduling): the same draws as the synchronous engine,
and the steps whose sampling needs host-side work still run synchronously."""

import random

import pytest

from tachyon import LLM, SamplingParams
from tachyon.config import EngineConfig


@pytest.fixture(scope="module")
def pair(tiny_qwen3):
    over = LLM(tiny_qwen3, device="cpu", dtype="float32", max_model_len=128, block_size=4, overlap_scheduling=True)
    sync = LLM(tiny_qwen3, device="cpu", dtype="float32", max_model_len=128, block_size=4, overlap_scheduling=False)
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


@pytest.mark.parametrize("kw", [dict(logprobs=2), dict(prompt_logprobs=1), dict(repetition_penalty=1.3),
                                dict(min_tokens=2), dict(logit_bias={77: 100.0})])
def test_host_side_sampling_runs_synchronously(pair, kw):
    """Logprobs, prompt logprobs, logit biases, penalties and min_tokens bans need the logits on the host: such a
    prefill is not launched, and its tokens still equal the synchronous engine's."""
    over, sync = pair
    prompts = _prompts(2, seed=2)
    sp = SamplingParams(temperature=0, max_tokens=4, ignore_eos=True, **kw)
    before = over.engine.runner.num_prefills_launched
    assert _tokens(over, prompts, sp) == _tokens(sync, prompts, sp)
    assert over.engine.runner.num_prefills_launched == before


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
