"""The padded mixed step (decodes + one or two prompt chunks) that the mixed CUDA graphs replay, run eagerly on CPU:
the same logits as the unpadded eager step, the same greedy tokens as transformers, the same seeded draws as the
engine without it (synchronous and overlapped), and only eligible steps take it."""

import random

import pytest
import torch

from tachyon import LLM, SamplingParams
from tachyon.engine.batch import build_batch
from tachyon.engine.mixed_graph import MixedGraphRunner
from tachyon.engine.scheduler import SchedulerOutput
from tests.engine.order_spy import spy_decode_order
from tests.hf_oracle import assert_greedy_parity, hf_greedy, hf_model


class _Counting(MixedGraphRunner):
    runs = 0

    def run(self, sched, src_rows=None):
        type(self).runs += 1
        return super().run(sched, src_rows)


def _install(llm: LLM, max_decodes: int = 5, max_chunk: int = 20) -> _Counting:
    """A mixed runner on the engine's runner, run eagerly (CPU): the engine's mixed steps take it."""
    r = llm.engine.runner
    r.mixed_graphs = _Counting(r.model, max_decodes=max_decodes, max_chunk=max_chunk, max_model_len=r.max_model_len,
                               block_size=r.block_size, vocab_size=r.spec.vocab_size, device=r.device,
                               last_tokens=r.last_tokens, use_graphs=False)
    return r.mixed_graphs


def _prompts(n: int, seed: int, lo: int = 3, hi: int = 30) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(3, 1000) for _ in range(rng.randint(lo, hi))] for _ in range(n)]


def _tie_explained_prefix(got, want) -> int:
    """How many of two completions' first tokens to compare in full: all when their tokens are equal; else, for a
    row reporting logprobs, up to a first divergence that a tie explains (the two engines' chosen tokens carry the
    same logprob within 1e-5: the tiny random model's near-uniform distribution puts tokens of logprobs ~1e-6 apart
    next to each other in top-p's sorted order, and the mixed step's other batch shape moves fp32 sums by ~1e-6,
    enough to swap such neighbours under the same uniform draw). Any other divergence fails."""
    if got.token_ids == want.token_ids:
        return len(got.token_ids)
    pos = next(i for i, (a, b) in enumerate(zip(got.token_ids, want.token_ids)) if a != b)
    assert got.logprobs is not None, f"tokens differ at {pos} in a row without logprobs (no tie can be shown)"
    lg, lw = got.logprobs[pos][got.token_ids[pos]].logprob, want.logprobs[pos][want.token_ids[pos]].logprob
    assert abs(lg - lw) < 1e-5, f"tokens differ at {pos}: logprobs {lg} and {lw} are no tie"
    return pos


def _tokens(llm: LLM, prompts, sps) -> list[list[int]]:
    return [o.outputs[0].token_ids for o in llm.generate(prompts, sps, use_tqdm=False)]


def _decoding_with_new_prompt(llm: LLM, decodes: int, chunk: int) -> SchedulerOutput:
    """`decodes` requests past their prefill, then one new prompt of `chunk` tokens: the next step is mixed."""
    eng = llm.engine
    for i, p in enumerate(_prompts(decodes, seed=5)):
        eng.add_request(f"d{i}", p, SamplingParams(temperature=0.8, top_p=0.9, seed=i, max_tokens=8))
    eng.step()
    eng.step()
    eng.add_request("c", _prompts(1, seed=6, lo=chunk, hi=chunk)[0], SamplingParams(temperature=0.0, max_tokens=4))
    return eng.scheduler.schedule()


def _small_mixed_runner(r, sched: SchedulerOutput) -> MixedGraphRunner:
    """An eager mixed runner on runner `r`'s model with buckets decode 4/8 and chunk 16; `sched` must take key
    (4, 16)."""
    mixed = MixedGraphRunner(r.model, max_decodes=8, max_chunk=16, max_model_len=r.max_model_len,
                             block_size=r.block_size, vocab_size=r.spec.vocab_size, device=r.device,
                             last_tokens=torch.zeros(10, dtype=torch.int64), use_graphs=False)
    mixed.decode_buckets, mixed.chunk_buckets = [4, 8], [16]
    assert mixed.fits(sched) and mixed.key_for(sched) == (4, 16)
    return mixed


def _eager_all_rows_logits(r, sched: SchedulerOutput) -> torch.Tensor:
    """The plain eager step's fp32 logits of each sampling request, every row through the last layer."""
    batch = build_batch(sched, r.block_size, r.device)
    hidden = r.model(batch.input_ids, batch.positions, batch.meta)
    return r.model.compute_logits(hidden[batch.logits_rows]).float()


def test_padded_mixed_step_matches_unpadded(tiny_qwen3):
    """Padding decode rows (3 -> bucket 4), padding chunk tokens (11 -> bucket 16): the requests' logits equal
    the plain eager step's, and the drawn tokens are those rows' draws."""
    llm = LLM(tiny_qwen3, device="cpu", dtype="float32", max_model_len=128, block_size=4, overlap_scheduling=False)
    eng = llm.engine
    sched = _decoding_with_new_prompt(llm, decodes=3, chunk=11)
    assert sched.num_new_tokens == [1, 1, 1, 11]
    r = eng.runner
    mixed = _small_mixed_runner(r, sched)
    logits, tokens = mixed.run(sched)
    ref = _eager_all_rows_logits(r, sched)
    torch.testing.assert_close(logits, ref, rtol=1e-4, atol=1e-4)
    assert tokens.shape == (4,) and int(tokens[3]) == int(ref[3].argmax()), "the chunk's row draws greedily"
    for rid in ("d0", "d1", "d2", "c"):
        eng.abort(rid)
    eng.check_integrity()


@pytest.mark.parametrize("prune", ["1", "0"])
def test_two_chunks_beside_padded_decodes_match_all_rows_step(tiny_qwen3, prune, monkeypatch):
    """3 decodes in decode bucket 4, then two whole prompts: every request's logits (the decodes' and both chunks'
    last tokens) equal the eager all-rows step's, whether the last layer runs on the sample rows only (their
    sequences: 0, 1, 2, then the chunks' 4 and 5, not 3 and 4) or on every row (TACHYON_PRUNE_LAST_LAYER=0)."""
    monkeypatch.setenv("TACHYON_PRUNE_LAST_LAYER", prune)
    llm = LLM(tiny_qwen3, device="cpu", dtype="float32", max_model_len=128, block_size=4, overlap_scheduling=False)
    eng = llm.engine
    for i, p in enumerate(_prompts(3, seed=5)):
        eng.add_request(f"d{i}", p, SamplingParams(temperature=0.8, seed=i, max_tokens=8))
    eng.step()
    eng.step()
    for i, p in enumerate(_prompts(2, seed=9, lo=5, hi=8)):
        eng.add_request(f"c{i}", p, SamplingParams(temperature=0.0, max_tokens=4))
    sched = eng.scheduler.schedule()
    assert sched.num_new_tokens[:3] == [1, 1, 1] and len(sched.requests) == 5
    r = eng.runner
    mixed = _small_mixed_runner(r, sched)
    keeps = []
    forward = r.model.forward
    monkeypatch.setattr(r.model, "forward", lambda *a, keep=None, **kw: (keeps.append(keep), forward(*a, **kw,
                                                                                                     keep=keep))[1])
    logits, tokens = mixed.run(sched)
    assert (keeps[0] is not None) == (prune == "1")
    ref = _eager_all_rows_logits(r, sched)
    torch.testing.assert_close(logits, ref, rtol=1e-4, atol=1e-4)
    assert torch.isfinite(mixed.logits[:6]).all(), "the padding sample row"
    assert [int(t) for t in tokens[3:]] == ref[3:].argmax(-1).tolist(), "the chunks' rows draw greedily"
    for rid in ("d0", "d1", "d2", "c0", "c1"):
        eng.abort(rid)
    eng.check_integrity()


@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_mixed_path_greedy_matches_transformers(arch):
    """At most 3 running requests of varied lengths and a 24-token budget: a finished request's place goes to the
    next prompt beside the running decodes, whose tokens are still in flight when that step is launched (overlap:
    the decode rows read them on the device); longer prompts come in chunks."""
    from tests.tiny_models import tiny_model_dir

    path = tiny_model_dir(arch)
    prompts = _prompts(8, seed=7, hi=22) + _prompts(2, seed=8, lo=30, hi=40)  # the long ones come in chunks
    lengths = [4 + i % 5 for i in range(10)]
    hf = hf_model(path)
    expected = [hf_greedy(hf, p, m) for p, m in zip(prompts, lengths)]
    llm = LLM(path, device="cpu", dtype="float32", max_num_batched_tokens=24, max_num_seqs=3, block_size=4,
              overlap_scheduling=True)
    _Counting.runs = 0
    src_seen = []
    mixed = _install(llm, max_decodes=2, max_chunk=23)
    fill = mixed._fill
    mixed._fill = lambda sched, src, d, c: (src_seen.extend(src), fill(sched, src, d, c))
    sps = [SamplingParams(temperature=0.0, max_tokens=m, ignore_eos=True) for m in lengths]
    outs = llm.generate(prompts, sps, use_tqdm=False)
    assert_greedy_parity(hf, prompts, [o.outputs[0].token_ids for o in outs], expected)
    assert _Counting.runs > 0, "the mixed path was never taken"
    assert llm.engine.runner.num_mixed_launched > 0, "no mixed step was launched without waiting (overlap)"
    assert any(s >= 0 for s in src_seen), "no decode row read its pending token on the device"
    llm.engine.check_integrity()


@pytest.mark.parametrize("overlap", [True, False])
def test_mixed_path_seeded_draws_equal_eager_engine(tiny_qwen3, overlap):
    """Temperature, top-k, top-p and min-p draws (seeded per request) through the mixed path equal those of the
    same engine without it."""
    kw = dict(device="cpu", dtype="float32", max_model_len=128, block_size=4, max_num_batched_tokens=24,
              max_num_seqs=3, overlap_scheduling=overlap)
    plain, mixed = LLM(tiny_qwen3, **kw), LLM(tiny_qwen3, **kw)
    _Counting.runs = 0
    _install(mixed, max_decodes=2)
    prompts = _prompts(6, seed=2)
    sps = [SamplingParams(temperature=0.9, top_k=40 if i % 2 else 0, top_p=0.9, min_p=0.02 * i, seed=50 + i,
                          max_tokens=4 + i, ignore_eos=True) for i in range(6)]
    assert _tokens(mixed, prompts, sps) == _tokens(plain, prompts, sps)
    assert _Counting.runs > 0
    for llm in (plain, mixed):
        llm.engine.check_integrity()


def test_fits_only_eligible_steps(tiny_qwen3):
    llm = LLM(tiny_qwen3, device="cpu", dtype="float32", max_model_len=128, block_size=4, overlap_scheduling=False)
    eng = llm.engine
    sched = _decoding_with_new_prompt(llm, decodes=3, chunk=11)
    r = eng.runner
    mixed = MixedGraphRunner(r.model, max_decodes=3, max_chunk=12, max_model_len=r.max_model_len,
                             block_size=r.block_size, vocab_size=r.spec.vocab_size, device=r.device,
                             last_tokens=torch.zeros(5, dtype=torch.int64), use_graphs=False)
    reqs, n = sched.requests, sched.num_new_tokens
    assert mixed.fits(sched)
    assert not mixed.fits(SchedulerOutput(reqs[:3], n[:3])), "decode-only steps belong to the decode graphs"
    assert not mixed.fits(SchedulerOutput(reqs[3:], n[3:])), "a chunk alone is a prefill step"
    assert not mixed.fits(SchedulerOutput([reqs[3]] + reqs[:3], [11, 1, 1, 1])), "the chunk must come last"
    assert not mixed.fits(SchedulerOutput(reqs, n[:3] + [13])), "over the chunk bucket"
    small = MixedGraphRunner(r.model, max_decodes=2, max_chunk=12, max_model_len=r.max_model_len,
                             block_size=r.block_size, vocab_size=r.spec.vocab_size, device=r.device,
                             last_tokens=torch.zeros(5, dtype=torch.int64), use_graphs=False)
    assert not small.fits(sched), "over the decode bucket"
    reqs[0].prompt_logprobs = []
    assert not mixed.fits(sched), "prompt logprobs need every position's hidden state"
    reqs[0].prompt_logprobs = None
    for rid in ("d0", "d1", "d2", "c"):
        eng.abort(rid)
    with pytest.raises(ValueError, match="at least 6 rows"):  # 4 decodes' and 2 chunks' sample rows
        MixedGraphRunner(r.model, max_decodes=4, max_chunk=12, max_model_len=r.max_model_len, block_size=4,
                         vocab_size=r.spec.vocab_size, device=r.device, last_tokens=torch.zeros(5, dtype=torch.int64))


def test_prefill_graph_first_unless_decode_inputs_are_pending(tiny_qwen3):
    """With both padded runners installed, a mixed step that a prefill graph covers and whose inputs are all on
    the host takes the prefill graph (less padding); one whose decode rows' tokens are in flight takes the mixed
    graph (the prefill graph has no device-side inputs). Tokens stay those of the engine without either."""
    from tachyon.engine.prefill_graph import PrefillGraphRunner

    class _CountingPrefill(PrefillGraphRunner):
        runs = 0

        def run(self, sched):
            type(self).runs += 1
            assert not any(r.num_pending for r in sched.requests), "a pending input reached the prefill graph"
            return super().run(sched)

    kw = dict(device="cpu", dtype="float32", max_model_len=128, block_size=4, max_num_batched_tokens=24,
              max_num_seqs=3, overlap_scheduling=True)
    plain, both = LLM(tiny_qwen3, **kw), LLM(tiny_qwen3, **kw)
    r = both.engine.runner
    _Counting.runs = _CountingPrefill.runs = 0
    _install(both, max_decodes=2, max_chunk=23)
    r.prefill_graphs = _CountingPrefill(r.model, max_tokens=24, max_seqs=3, max_model_len=r.max_model_len,
                                        block_size=r.block_size, vocab_size=r.spec.vocab_size, device=r.device,
                                        last_tokens=r.last_tokens, use_graphs=False)
    prompts = _prompts(9, seed=4, hi=20)
    sps = [SamplingParams(temperature=0.0, max_tokens=3 + i % 4, ignore_eos=True) for i in range(9)]
    assert _tokens(both, prompts, sps) == _tokens(plain, prompts, sps)
    assert _Counting.runs > 0 and _CountingPrefill.runs > 0
    assert r.num_mixed_launched > 0, "pending decode inputs never took the mixed graph"
    both.engine.check_integrity()


@pytest.mark.parametrize("arch,attn", [("llama", "one"), ("qwen3", "one"), ("qwen3", "two")])
def test_two_chunk_and_unfinished_chunk_steps_greedy_match_transformers(arch, attn, monkeypatch):
    """An 18-token budget beside up to 3 decodes: steps whose budget spans the end of one prompt and the start of the
    next (two chunks), and steps whose chunk stops short of its prompt's end, replay the mixed path, launched
    without waiting (overlap; an unfinished chunk draws nothing); the chunks sit right after the real decode rows,
    in the decode bucket's padding. Their attention runs as one launch or as one per part (TACHYON_MIXED_ATTN).
    Every request's tokens are transformers' greedy ones."""
    monkeypatch.setenv("TACHYON_MIXED_ATTN", attn)
    from tests.tiny_models import tiny_model_dir

    path = tiny_model_dir(arch)
    prompts = _prompts(9, seed=12, lo=4, hi=26)
    lengths = [3 + (i * 5) % 11 for i in range(9)]
    hf = hf_model(path)
    expected = [hf_greedy(hf, p, m) for p, m in zip(prompts, lengths)]
    llm = LLM(path, device="cpu", dtype="float32", max_num_batched_tokens=18, max_num_seqs=4, block_size=4,
              overlap_scheduling=True)
    mixed = _install(llm, max_decodes=3, max_chunk=16)
    mixed.decode_buckets, mixed.chunk_buckets = [2, 3], [4, 8, 16]
    shapes = []  # each step that took the mixed path: (decodes, its chunks' (tokens, reaches the prompt's end))
    fill = mixed._fill

    def recording_fill(sched, src, d_pad, c_pad):
        d = mixed.num_decodes(sched)
        shapes.append((d, [(n, r.num_computed_tokens + n == r.num_tokens)
                           for r, n in zip(sched.requests[d:], sched.num_new_tokens[d:])]))
        return fill(sched, src, d_pad, c_pad)

    mixed._fill = recording_fill
    runner, partial_launches = llm.engine.runner, []
    launch = runner.launch

    def recording_launch(sched):
        pending = launch(sched)
        partial_launches.append(pending.rows is not None)  # a launched step in which some request draws nothing
        return pending

    runner.launch = recording_launch
    sps = [SamplingParams(temperature=0.0, max_tokens=m, ignore_eos=True) for m in lengths]
    outs = llm.generate(prompts, sps, use_tqdm=False)
    assert_greedy_parity(hf, prompts, [o.outputs[0].token_ids for o in outs], expected)
    assert any(partial_launches), "no step with an unfinished chunk was launched without waiting"
    assert any(len(c) == 2 for _, c in shapes), "no mixed step carried two prompts"
    assert any(not done for _, c in shapes for _, done in c), "no mixed chunk stopped short of its prompt's end"
    assert any(sum(n for n, _ in c) > 16 for _, c in shapes), (
        "no step's chunks used a decode bucket's padding rows (more tokens than the largest chunk bucket)")
    assert llm.engine.runner.num_mixed_launched > 0
    llm.engine.check_integrity()


def test_lpt_order_hands_the_attention_its_decodes_longest_first(tiny_qwen3, monkeypatch):
    """TACHYON_MIXED_ORDER=lpt (the default): the mixed step's decode part carries its real sequences longest first,
    then the padding ones, and the one-launch attention receives that order; the logits are the eager all-rows
    step's. Under TACHYON_MIXED_ORDER=batch no order is passed."""
    seen = spy_decode_order(monkeypatch, "mixed_attention")
    monkeypatch.setenv("TACHYON_MIXED_ATTN", "one")
    llm = LLM(tiny_qwen3, device="cpu", dtype="float32", max_model_len=128, block_size=4, overlap_scheduling=False)
    eng = llm.engine
    for i, p in enumerate([[5] * 4, [6] * 17, [7] * 9]):  # contexts differ: the order is not the batch's
        eng.add_request(f"d{i}", p, SamplingParams(temperature=0.0, max_tokens=8))
    eng.step()
    eng.step()
    eng.add_request("c", _prompts(1, seed=6, lo=11, hi=11)[0], SamplingParams(temperature=0.0, max_tokens=4))
    sched = eng.scheduler.schedule()
    r = eng.runner
    lens = [req.num_tokens for req in sched.requests[:3]]
    want = sorted(range(3), key=lambda i: -lens[i]) + [3]  # then the padding sequence of bucket 4
    for order in ("batch", "lpt", ""):
        monkeypatch.setenv("TACHYON_MIXED_ORDER", order)
        seen.clear()
        mixed = _small_mixed_runner(r, sched)
        logits, _ = mixed.run(sched)
        torch.testing.assert_close(logits, _eager_all_rows_logits(r, sched), rtol=1e-4, atol=1e-4)
        assert len(seen) == r.spec.num_layers - 1  # the last layer attends on the sample rows only
        assert all(o == (None if order == "batch" else want) for o in seen), (order, seen[0], lens)
    for rid in ("d0", "d1", "d2", "c"):
        eng.abort(rid)
    eng.check_integrity()


@pytest.mark.parametrize("mode", ["structured", "all", "synchronous"])
def test_launched_mixed_steps_redraw_rows_and_report_logprobs(tiny_qwen3, monkeypatch, mode):
    """Mixed steps (decodes beside a new prompt's chunk) holding structured rows and rows asking for logprobs are
    launched: `finish_launch` redraws the structured rows (a chunk's first token included) and computes the
    logprobs on the device; under LAUNCHED_REDRAWS "all" biased, penalised and min_tokens rows too. Without
    overlap, the Sampler keeps the graph's draws but for those rows, which it redraws alone. Tokens and logprobs
    equal the synchronous engine's without the mixed path."""
    from tachyon import StructuredOutputsParams
    from tachyon.engine import sampler

    monkeypatch.setattr(sampler, "LAUNCHED_REDRAWS", "structured" if mode == "synchronous" else mode)
    kw = dict(device="cpu", dtype="float32", max_model_len=128, block_size=4, max_num_batched_tokens=24,
              max_num_seqs=3)
    plain = LLM(tiny_qwen3, **kw, overlap_scheduling=False)
    mixed = LLM(tiny_qwen3, **kw, overlap_scheduling=mode != "synchronous")
    _Counting.runs = 0
    _install(mixed, max_decodes=2)
    base = dict(max_tokens=10, ignore_eos=True)
    kinds = [SamplingParams(temperature=0.9, seed=1, structured_outputs=StructuredOutputsParams(regex="[a-z]{3,20}"),
                            max_tokens=10),
             SamplingParams(temperature=0.8, top_p=0.9, seed=2, logprobs=2, **base),
             SamplingParams(temperature=0.9, seed=3, logit_bias={50: 5.0, 51: -100.0}, **base),
             SamplingParams(temperature=0.9, seed=4, presence_penalty=0.7, repetition_penalty=1.2, logprobs=1, **base),
             SamplingParams(temperature=0.0, min_tokens=8, max_tokens=10),
             SamplingParams(temperature=0.9, seed=6, **base)]
    if mode == "structured":  # a biased, penalised or min_tokens row would make its steps synchronous
        kinds = [kinds[0], kinds[1], kinds[5]]
    prompts = _prompts(12, seed=4)
    sps = [kinds[i % len(kinds)] for i in range(12)]
    got = [o.outputs[0] for o in mixed.generate(prompts, sps, use_tqdm=False)]
    want = [o.outputs[0] for o in plain.generate(prompts, sps, use_tqdm=False)]
    for g, w in zip(got, want):
        assert (g.logprobs is None) == (w.logprobs is None)
        assert g.logprobs is None or len(g.logprobs) == len(w.logprobs) == len(g.token_ids)
        n = _tie_explained_prefix(g, w)
        for dg, dw in zip((g.logprobs or [])[:n], (w.logprobs or [])[:n]):
            assert dg.keys() == dw.keys() and all(abs(dg[t].logprob - dw[t].logprob) < 1e-5 for t in dg)
    runner = mixed.engine.runner
    assert _Counting.runs > 0
    if mode != "synchronous":
        assert runner.num_mixed_launched > 0 and runner.num_rows_redrawn > 0 and runner.num_logprob_rows_launched > 0
    mixed.engine.check_integrity()
