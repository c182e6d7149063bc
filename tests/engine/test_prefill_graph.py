"""The padded prefill step that the prefill CUDA graphs replay, run eagerly on CPU: same greedy tokens as
transformers, same logits as the unpadded eager step, and only eligible steps take it."""

import random

import pytest
import torch

from tachyon import LLM, SamplingParams
from tachyon.engine.batch import build_batch
from tachyon.engine.prefill_graph import PrefillGraphRunner
from tachyon.engine.scheduler import SchedulerOutput
from tests.hf_oracle import assert_greedy_parity, hf_greedy, hf_model


def _padded_runner(llm: LLM, max_tokens: int = 64, max_seqs: int = 4) -> PrefillGraphRunner:
    r = llm.engine.runner
    return PrefillGraphRunner(r.model, max_tokens=max_tokens, max_seqs=max_seqs, max_model_len=r.max_model_len,
                              block_size=r.block_size, vocab_size=r.spec.vocab_size, device=r.device,
                              last_tokens=torch.zeros(max_seqs, dtype=torch.int64), use_graphs=False)


class _Counting(PrefillGraphRunner):
    runs = 0

    def run(self, sched):
        type(self).runs += 1
        return super().run(sched)


@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_padded_prefill_greedy_matches_transformers(arch):
    from tests.tiny_models import tiny_model_dir

    path = tiny_model_dir(arch)
    rng = random.Random(7)
    prompts = [[rng.randrange(3, 49152) for _ in range(rng.randint(3, 40))] for _ in range(7)]
    hf = hf_model(path)
    expected = [hf_greedy(hf, p, 6) for p in prompts]
    # a 24-token budget forces chunked prefills mixed with decodes; buckets of 16 / 24 tokens, 1-4 seqs
    llm = LLM(path, device="cpu", dtype="float32", max_num_batched_tokens=24, block_size=4, overlap_scheduling=True)
    r = llm.engine.runner
    _Counting.runs = 0
    r.prefill_graphs = _Counting(r.model, max_tokens=24, max_seqs=4, max_model_len=r.max_model_len,
                                 block_size=r.block_size, vocab_size=r.spec.vocab_size, device=r.device,
                                 last_tokens=r.last_tokens, use_graphs=False)
    outs = llm.generate(prompts, SamplingParams(temperature=0.0, max_tokens=6, ignore_eos=True), use_tqdm=False)
    assert_greedy_parity(hf, prompts, [o.outputs[0].token_ids for o in outs], expected)
    assert _Counting.runs > 0, "the padded prefill path was never taken"
    assert r.num_prefills_launched > 0, "no padded prefill step was launched without waiting (overlap)"
    llm.engine.check_integrity()


def test_padded_step_logits_match_unpadded(tiny_qwen3):
    llm = LLM(tiny_qwen3, device="cpu", dtype="float32", max_model_len=128, block_size=4)
    eng = llm.engine
    rng = random.Random(3)
    for i, n in enumerate((5, 11, 2)):
        eng.add_request(f"r{i}", [rng.randrange(3, 1000) for _ in range(n)],
                        SamplingParams(temperature=0.8, top_p=0.9, seed=i, max_tokens=4))
    sched = eng.scheduler.schedule()
    assert len(sched.requests) == 3 and sum(sched.num_new_tokens) == 18
    padded = _padded_runner(llm, max_tokens=32, max_seqs=4)
    assert padded.fits(sched)
    logits, tokens = padded.run(sched)
    batch = build_batch(sched, eng.runner.block_size, eng.runner.device)
    hidden = eng.runner.model(batch.input_ids, batch.positions, batch.meta)
    ref = eng.runner.model.compute_logits(hidden[batch.logits_rows]).float()
    torch.testing.assert_close(logits, ref, rtol=1e-4, atol=1e-4)
    assert tokens.shape == (3,) and bool(((tokens >= 0) & (tokens < ref.shape[1])).all())
    for i in range(3):
        eng.abort(f"r{i}")


def test_fits_only_eligible_steps(tiny_qwen3):
    llm = LLM(tiny_qwen3, device="cpu", dtype="float32", max_model_len=128, block_size=4)
    eng = llm.engine
    padded = _padded_runner(llm, max_tokens=16, max_seqs=2)
    reqs = []
    for i, n in enumerate((10, 3, 20)):
        eng.add_request(f"f{i}", list(range(5, 5 + n)), SamplingParams(max_tokens=2))
        reqs.append(eng._children[f"f{i}"])
    assert padded.fits(SchedulerOutput(reqs[:2], [10, 3]))
    assert not padded.fits(SchedulerOutput(reqs[:1] + reqs[2:], [10, 20])), "over the token bucket"
    assert not padded.fits(SchedulerOutput(reqs, [4, 3, 2])), "over the sequence bucket"
    assert not padded.fits(SchedulerOutput(reqs[:2], [1, 1])), "decode-only steps belong to the decode graphs"
    reqs[0].prompt_logprobs = []
    assert not padded.fits(SchedulerOutput(reqs[:2], [10, 3])), "prompt logprobs need every position's hidden"
    for i in range(3):
        eng.abort(f"f{i}")
