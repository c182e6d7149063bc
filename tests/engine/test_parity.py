"""Greedy tokens equal transformers `generate` (fp32, CPU) whatever the batch mix, chunking or preemption
(or first diverge on a near-tie that transformers' own logits show: `assert_greedy_parity`)."""

import random
import zlib
from types import SimpleNamespace

import pytest
import torch

from tachyon import LLM, SamplingParams
from tests.hf_oracle import assert_greedy_parity, hf_greedy, hf_model

NEW_TOKENS = 10


def _prompts(n: int, seed: int, vocab: int = 49152) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(3, vocab) for _ in range(rng.randint(3, 45))] for _ in range(n)]


@pytest.fixture(scope="module", params=["llama", "qwen2", "qwen3"])
def arch_case(request):
    from tests.tiny_models import tiny_model_dir

    path = tiny_model_dir(request.param)
    prompts = _prompts(16, seed=zlib.crc32(request.param.encode()) % 1000)  # not hash(): salted per process
    hf = hf_model(path)
    expected = [hf_greedy(hf, p, NEW_TOKENS) for p in prompts]
    return path, prompts, expected, hf


GREEDY = SamplingParams(temperature=0.0, max_tokens=NEW_TOKENS, ignore_eos=True)

# overlap scheduling is off by default on the CPU ("default"); the other setups turn it on, as on CUDA
ON = dict(overlap_scheduling=True)
ENGINE_SETUPS = {
    "default": dict(),
    "overlap": ON,
    "chunked": dict(ON, max_num_batched_tokens=7, block_size=4),
    "preempt": dict(ON, num_kv_blocks=24, block_size=4, max_model_len=64),
    "sync-preempt": dict(num_kv_blocks=24, block_size=4, max_model_len=64, overlap_scheduling=False),
    "lpt": dict(ON, scheduling_policy="lpt"),  # equal lengths: arrival order, every request at once
    "lpt-lengths": dict(ON, scheduling_policy="lpt"),  # outputs of 1-10 tokens: the short ones wait (scheduler.py)
}


@pytest.mark.parametrize("setup", list(ENGINE_SETUPS))
def test_greedy_matches_transformers(arch_case, setup):
    path, prompts, expected, hf = arch_case
    llm = LLM(path, device="cpu", dtype="float32", **ENGINE_SETUPS[setup])
    if setup in ("default", "overlap"):  # one request at a time
        alone = [llm.generate([p], GREEDY, use_tqdm=False)[0].outputs[0].token_ids for p in prompts[:4]]
        assert_greedy_parity(hf, prompts[:4], alone, expected[:4])
    params = GREEDY
    if setup == "lpt-lengths":
        params = [SamplingParams(temperature=0.0, max_tokens=1 + (i * 7) % NEW_TOKENS, ignore_eos=True)
                  for i in range(len(prompts))]
        expected = [e[: p.max_tokens] for e, p in zip(expected, params)]
    outs = llm.generate(prompts, params, use_tqdm=False)
    assert_greedy_parity(hf, prompts, [o.outputs[0].token_ids for o in outs], expected)
    if "preempt" in setup:
        assert llm.engine.scheduler.num_preemptions > 0, "the small cache should have forced preemption"
    runner = llm.engine.runner
    # a 7-token budget leaves no whole prefill without pending decodes beside it: only decodes launch there
    counts = [runner.num_launched] + ([] if setup == "chunked" else [runner.num_prefills_launched])
    for launched in counts:
        assert (launched > 0) if ENGINE_SETUPS[setup].get("overlap_scheduling") else (launched == 0), "overlap use"
    llm.engine.check_integrity()


class _FixedLogits:
    """Stands in for a transformers model: the same next-token logits after every prefix."""

    def __init__(self, logits: list[float]):
        self.logits = torch.tensor(logits)

    def __call__(self, ids):
        return SimpleNamespace(logits=self.logits.expand(1, ids.shape[1], -1))


def test_parity_check_accepts_only_a_tie_the_oracle_shows():
    tie = _FixedLogits([0.0, 5.0, 5.0 - 1e-5, 1.0])  # tokens 1 and 2 within 1e-4 * max|logit|
    assert_greedy_parity(tie, [[3]], [[1, 2]], [[1, 2]])
    assert_greedy_parity(tie, [[3]], [[1, 2]], [[1, 1]])  # token 2 is as good as 1 after [1]
    with pytest.raises(AssertionError, match="diverges at token 0: got 3"):
        assert_greedy_parity(tie, [[3]], [[3, 1]], [[1, 1]])  # token 3 is 4.0 below: a real error
    with pytest.raises(AssertionError, match="2 tie-explained"):
        assert_greedy_parity(tie, [[3], [3]], [[2], [2]], [[1], [1]])
