"""The last layer run on the sampling rows only (batch.KeptRows, the model's `keep`): the same final hidden states
at those rows as the full forward, the same K/V stored for every row, and the engine's greedy tokens unchanged."""

import random

import pytest
import torch

from tachyon import LLM, SamplingParams
from tachyon.engine.batch import build_batch
from tests.hf_oracle import assert_greedy_parity, hf_greedy, hf_model


def _forward_both(llm: LLM, sched):
    """(full hidden at the logits rows, kept hidden, caches after the full pass, caches after the kept pass),
    each pass from the same cache contents."""
    r = llm.engine.runner
    before = [c.clone() for c in r.kv_caches]
    full_batch = build_batch(sched, r.block_size, r.device)
    kept_batch = build_batch(sched, r.block_size, r.device, keep_logits_rows=True)
    assert full_batch.keep is None and kept_batch.keep is not None
    full = r.model(full_batch.input_ids, full_batch.positions, full_batch.meta)[full_batch.logits_rows]
    after_full = [c.clone() for c in r.kv_caches]
    for c, b in zip(r.kv_caches, before):
        c.copy_(b)
    kept = r.model(kept_batch.input_ids, kept_batch.positions, kept_batch.meta, keep=kept_batch.keep)
    return full, kept, after_full, [c.clone() for c in r.kv_caches], kept_batch


@pytest.mark.parametrize("fixture", ["tiny_llama", "tiny_qwen2", "tiny_qwen3"])
def test_kept_rows_match_full_forward(fixture, request):
    path = request.getfixturevalue(fixture)
    llm = LLM(path, device="cpu", dtype="float32", max_model_len=128, block_size=4, max_num_batched_tokens=24)
    eng = llm.engine
    rng = random.Random(5)
    for i, n in enumerate((5, 11, 20)):
        eng.add_request(f"k{i}", [rng.randrange(3, 1000) for _ in range(n)], SamplingParams(max_tokens=3))
    sched = eng.scheduler.schedule()
    # the budget cuts the third prompt: two chunks sample, the third's 8 rows feed nothing after the last layer
    assert sched.num_new_tokens == [5, 11, 8]
    full, kept, caches_full, caches_kept, batch = _forward_both(llm, sched)
    assert batch.logits_rows == [4, 15] and batch.keep.rows.tolist() == [4, 15]
    assert batch.keep.meta.seq_lens.tolist() == [5, 11]
    assert kept.shape == full.shape == (2, full.shape[1])
    torch.testing.assert_close(kept, full, rtol=1e-5, atol=1e-5)
    assert not torch.equal(kept[0], kept[1])
    for a, b in zip(caches_full, caches_kept):
        assert torch.equal(a, b), "every row's K/V is stored, the last layer's too"
    for i in range(3):
        eng.abort(f"k{i}")


def test_no_sampling_row_still_stores_kv(tiny_qwen3):
    llm = LLM(tiny_qwen3, device="cpu", dtype="float32", max_model_len=128, block_size=4, max_num_batched_tokens=8)
    eng = llm.engine
    eng.add_request("p", list(range(7, 27)), SamplingParams(max_tokens=2))
    sched = eng.scheduler.schedule()
    assert sched.num_new_tokens == [8]  # a first chunk: nothing samples
    full, kept, caches_full, caches_kept, batch = _forward_both(llm, sched)
    assert batch.logits_rows == [] and kept.shape == (0, full.shape[1])
    last = caches_full[-1]
    assert last.abs().sum() > 0, "the last layer stored this chunk's K/V"
    for a, b in zip(caches_full, caches_kept):
        assert torch.equal(a, b)
    eng.abort("p")


def test_chunked_greedy_matches_transformers_with_and_without_pruning(tiny_qwen3, monkeypatch):
    rng = random.Random(11)
    prompts = [[rng.randrange(3, 49152) for _ in range(rng.randint(9, 40))] for _ in range(5)]
    hf = hf_model(tiny_qwen3)
    expected = [hf_greedy(hf, p, 5) for p in prompts]
    for knob in ("1", "0"):
        monkeypatch.setenv("TACHYON_PRUNE_LAST_LAYER", knob)
        llm = LLM(tiny_qwen3, device="cpu", dtype="float32", max_num_batched_tokens=16, block_size=4)
        outs = llm.generate(prompts, SamplingParams(temperature=0.0, max_tokens=5, ignore_eos=True), use_tqdm=False)
        assert_greedy_parity(hf, prompts, [o.outputs[0].token_ids for o in outs], expected,
                             what=f"TACHYON_PRUNE_LAST_LAYER={knob}")
        llm.engine.check_integrity()
