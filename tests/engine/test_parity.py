"""Greedy tokens equal transformers `generate` (fp32, CPU) whatever the batch mix, chunking or preemption."""

import random

import pytest

from tachyon import LLM, SamplingParams
from tests.hf_oracle import hf_greedy, hf_model

NEW_TOKENS = 10


def _prompts(n: int, seed: int, vocab: int = 49152) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(3, vocab) for _ in range(rng.randint(3, 45))] for _ in range(n)]


@pytest.fixture(scope="module", params=["llama", "qwen2", "qwen3"])
def arch_case(request):
    from tests.tiny_models import tiny_model_dir

    path = tiny_model_dir(request.param)
    prompts = _prompts(16, seed=hash(request.param) % 1000)
    hf = hf_model(path)
    expected = [hf_greedy(hf, p, NEW_TOKENS) for p in prompts]
    return path, prompts, expected


GREEDY = SamplingParams(temperature=0.0, max_tokens=NEW_TOKENS, ignore_eos=True)

ENGINE_SETUPS = {
    "default": dict(),
    "chunked": dict(max_num_batched_tokens=7, block_size=4),
    "preempt": dict(num_kv_blocks=24, block_size=4, max_model_len=64),
    "sync-preempt": dict(num_kv_blocks=24, block_size=4, max_model_len=64, overlap_scheduling=False),
}


@pytest.mark.parametrize("setup", list(ENGINE_SETUPS))
def test_greedy_matches_transformers(arch_case, setup):
    path, prompts, expected = arch_case
    llm = LLM(path, device="cpu", dtype="float32", **ENGINE_SETUPS[setup])
    if setup == "default":  # one request at a time
        for p, exp in zip(prompts[:4], expected[:4]):
            assert llm.generate([p], GREEDY, use_tqdm=False)[0].outputs[0].token_ids == exp
    outs = llm.generate(prompts, GREEDY, use_tqdm=False)
    got = [o.outputs[0].token_ids for o in outs]
    assert got == expected
    if "preempt" in setup:
        assert llm.engine.scheduler.num_preemptions > 0, "the small cache should have forced preemption"
    runner = llm.engine.runner
    # a 7-token budget leaves no whole prefill without pending decodes beside it: only decodes launch there
    counts = [runner.num_launched] + ([] if setup == "chunked" else [runner.num_prefills_launched])
    for launched in counts:
        assert (launched == 0) if setup.startswith("sync") else (launched > 0), "overlap path use"
    llm.engine.check_integrity()
