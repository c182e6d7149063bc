"""Sampling behaviour as vLLM documents it, checked against independent oracles."""

import random

import pytest
import torch

from tachyon import SamplingParams
from tests.hf_oracle import hf_logits, hf_model


def _prompt(seed: int, n: int = 12) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(3, 49152) for _ in range(n)]


def test_seeded_sampling_is_batch_independent(llm):
    sp = SamplingParams(temperature=0.9, top_p=0.9, top_k=200, seed=1234, max_tokens=16, ignore_eos=True)
    alone = llm.generate([_prompt(0)], sp, use_tqdm=False)[0].outputs[0].token_ids
    others = [_prompt(i, 5 + i) for i in range(1, 9)]
    params = [sp] + [SamplingParams(temperature=1.0, max_tokens=8 + i, ignore_eos=True) for i in range(4)] + [
        SamplingParams(temperature=0, max_tokens=20, ignore_eos=True) for _ in range(4)]
    mixed = llm.generate([_prompt(0)] + others, params, use_tqdm=False)
    assert mixed[0].outputs[0].token_ids == alone
    again = llm.generate([_prompt(0)], sp, use_tqdm=False)[0].outputs[0].token_ids
    assert again == alone
    other_seed = llm.generate([_prompt(0)], sp.clone(seed=99), use_tqdm=False)[0].outputs[0].token_ids
    assert other_seed != alone


def test_seeded_sampling_survives_preemption(tiny_llama):
    from tachyon import LLM

    sp = SamplingParams(temperature=1.0, seed=7, max_tokens=24, ignore_eos=True)
    roomy = LLM(tiny_llama, device="cpu", dtype="float32", max_model_len=64)
    ref = roomy.generate([_prompt(i, 20) for i in range(6)], sp, use_tqdm=False)
    tight = LLM(tiny_llama, device="cpu", dtype="float32", max_model_len=64, num_kv_blocks=20, block_size=4)
    got = tight.generate([_prompt(i, 20) for i in range(6)], sp, use_tqdm=False)
    assert tight.engine.scheduler.num_preemptions > 0
    assert [o.outputs[0].token_ids for o in got] == [o.outputs[0].token_ids for o in ref]
    tight.engine.check_integrity()


def test_greedy_is_temperature_zero_and_top_k_one(llm):
    p = _prompt(3)
    greedy = llm.generate([p], SamplingParams(temperature=0, max_tokens=12, ignore_eos=True), use_tqdm=False)
    topk1 = llm.generate([p], SamplingParams(temperature=1.5, top_k=1, seed=5, max_tokens=12, ignore_eos=True),
                         use_tqdm=False)
    assert greedy[0].outputs[0].token_ids == topk1[0].outputs[0].token_ids


def test_max_tokens_and_length_reason(llm):
    out = llm.generate([_prompt(4)], SamplingParams(temperature=0, max_tokens=7, ignore_eos=True),
                       use_tqdm=False)[0]
    assert len(out.outputs[0].token_ids) == 7 and out.outputs[0].finish_reason == "length"
    assert out.finished and out.metrics.first_token_time >= out.metrics.arrival_time


def test_stop_token_ids(llm):
    p = _prompt(5)
    base = llm.generate([p], SamplingParams(temperature=0, max_tokens=12, ignore_eos=True),
                        use_tqdm=False)[0].outputs[0].token_ids
    stop_tok = base[4]
    first = base.index(stop_tok)
    out = llm.generate([p], SamplingParams(temperature=0, max_tokens=12, ignore_eos=True,
                                           stop_token_ids=[stop_tok]), use_tqdm=False)[0].outputs[0]
    assert out.token_ids == base[: first + 1]
    assert out.finish_reason == "stop" and out.stop_reason == stop_tok
    # the stop token is in token_ids but not in the text (vLLM)
    tok = llm.get_tokenizer()
    assert out.text == tok.decode(base[:first], skip_special_tokens=True)


def test_min_tokens_suppresses_stop_tokens(llm):
    p = _prompt(6)
    base = llm.generate([p], SamplingParams(temperature=0, max_tokens=12, ignore_eos=True),
                        use_tqdm=False)[0].outputs[0].token_ids
    stop_tok = base[0]
    out = llm.generate([p], SamplingParams(temperature=0, max_tokens=12, min_tokens=5, ignore_eos=True,
                                           stop_token_ids=[stop_tok]), use_tqdm=False)[0].outputs[0]
    assert len(out.token_ids) >= 5
    assert stop_tok not in out.token_ids[:5]


def test_stop_strings_spanning_tokens(llm):
    p = _prompt(8)
    tok = llm.get_tokenizer()
    base = llm.generate([p], SamplingParams(temperature=0, max_tokens=20, ignore_eos=True), use_tqdm=False)[0]
    text = base.outputs[0].text
    assert len(text) > 12
    # a stop string that starts inside one token and ends inside a later one
    offsets, acc = [], ""
    for _ in base.outputs[0].token_ids:
        acc = tok.decode(base.outputs[0].token_ids[: len(offsets) + 1], skip_special_tokens=True)
        offsets.append(len(acc))
    start = next(i for i in range(2, len(text) - 6) if i not in offsets and text[i:i + 6].strip())
    stop = text[start:start + 6]
    start = text.index(stop)
    out = llm.generate([p], SamplingParams(temperature=0, max_tokens=20, ignore_eos=True, stop=[stop]),
                       use_tqdm=False)[0].outputs[0]
    assert out.text == text[:start]
    assert out.finish_reason == "stop" and out.stop_reason == stop
    incl = llm.generate([p], SamplingParams(temperature=0, max_tokens=20, ignore_eos=True, stop=[stop],
                                            include_stop_str_in_output=True), use_tqdm=False)[0].outputs[0]
    assert incl.text == text[: start + len(stop)]


def test_n_greater_than_one(llm):
    sp = SamplingParams(n=3, temperature=1.0, seed=11, max_tokens=10, ignore_eos=True)
    out = llm.generate([_prompt(9)], sp, use_tqdm=False)[0]
    assert [c.index for c in out.outputs] == [0, 1, 2]
    assert all(len(c.token_ids) == 10 for c in out.outputs)
    assert len({tuple(c.token_ids) for c in out.outputs}) == 3
    again = llm.generate([_prompt(9)], sp, use_tqdm=False)[0]
    assert [c.token_ids for c in again.outputs] == [c.token_ids for c in out.outputs]


def test_logprobs_match_transformers_log_softmax(llm, tiny_llama):
    p = _prompt(10)
    out = llm.generate([p], SamplingParams(temperature=0.8, seed=3, max_tokens=8, ignore_eos=True, logprobs=5,
                                           prompt_logprobs=3), use_tqdm=False)[0]
    comp = out.outputs[0]
    ids = p + comp.token_ids
    ref = torch.log_softmax(hf_logits(hf_model(tiny_llama), ids), dim=-1)
    assert len(comp.logprobs) == len(comp.token_ids)
    cum = 0.0
    for i, (tok, d) in enumerate(zip(comp.token_ids, comp.logprobs)):
        row = ref[len(p) - 1 + i]
        assert tok in d and len(d) in (5, 6)
        assert abs(d[tok].logprob - row[tok].item()) < 1e-4
        assert d[tok].rank == int((row > row[tok]).sum()) + 1
        top = torch.topk(row, 5)
        for r, (tid, v) in enumerate(zip(top.indices.tolist(), top.values.tolist())):
            assert abs(d[tid].logprob - v) < 1e-4
            if tid != tok:
                assert d[tid].rank == r + 1
        cum += d[tok].logprob
    assert abs(comp.cumulative_logprob - cum) < 1e-3
    # prompt logprobs: first entry None, then the prompt token's logprob under the model
    assert out.prompt_logprobs[0] is None and len(out.prompt_logprobs) == len(p)
    for j in range(1, len(p)):
        d = out.prompt_logprobs[j]
        assert abs(d[p[j]].logprob - ref[j - 1, p[j]].item()) < 1e-4
        assert len(d) in (3, 4)


def test_prompt_logprobs_in_row_slices_match_transformers(llm, tiny_llama, monkeypatch):
    """Prompt logits are taken a slice of rows at a time (bounded memory at any step budget): slices of 4 rows over a
    23-token prompt (22 entries: 5 full slices and a short one) still give every position transformers' logprob."""
    from tachyon.engine import runner
    monkeypatch.setattr(runner, "PROMPT_LOGPROB_ROWS", 4)
    p = _prompt(11, 23)
    out = llm.generate([p], SamplingParams(temperature=0, max_tokens=1, prompt_logprobs=2), use_tqdm=False)[0]
    ref = torch.log_softmax(hf_logits(hf_model(tiny_llama), p), dim=-1)
    assert out.prompt_logprobs[0] is None and len(out.prompt_logprobs) == len(p)
    for j in range(1, len(p)):
        d = out.prompt_logprobs[j]
        assert abs(d[p[j]].logprob - ref[j - 1, p[j]].item()) < 1e-4
        row, x = ref[j - 1], ref[j - 1, p[j]]  # near-flat logits: a rank within fp32 noise of the reference's
        assert int((row > x + 1e-4).sum()) + 1 <= d[p[j]].rank <= int((row > x - 1e-4).sum()) + 1
        assert len(d) in (2, 3)


def test_repetition_penalty_matches_transformers(llm, tiny_llama):
    p = _prompt(12)
    hf = hf_model(tiny_llama)
    ids = torch.tensor([p])
    with torch.no_grad():
        exp = hf.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=10,
                          repetition_penalty=1.5, pad_token_id=0)[0, len(p):].tolist()
    got = llm.generate([p], SamplingParams(temperature=0, repetition_penalty=1.5, max_tokens=10, ignore_eos=True),
                       use_tqdm=False)[0].outputs[0].token_ids
    assert got == exp
    plain = llm.generate([p], SamplingParams(temperature=0, max_tokens=10, ignore_eos=True),
                         use_tqdm=False)[0].outputs[0].token_ids
    assert got != plain  # the penalty really changed this path (the tiny model repeats one token)


def test_logit_bias_matches_transformers(llm, tiny_llama):
    """Greedy decoding under logit_bias equals transformers' generate under the same single-token sequence_bias
    (the `llm` fixture overlaps steps, so this also checks a biased row never takes a launched step's raw draw);
    the bias really moves the path."""
    p = _prompt(13)
    plain = llm.generate([p], SamplingParams(temperature=0, max_tokens=10, ignore_eos=True),
                         use_tqdm=False)[0].outputs[0].token_ids
    bias = {plain[0]: -8.0, 7: 1.5, 1000: 2.5}
    ids = torch.tensor([p])
    with torch.no_grad():
        exp = hf_model(tiny_llama).generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                            max_new_tokens=10, pad_token_id=0,
                                            sequence_bias=[[[t], b] for t, b in bias.items()])[0, len(p):].tolist()
    got = llm.generate([p], SamplingParams(temperature=0, logit_bias=bias, max_tokens=10, ignore_eos=True),
                       use_tqdm=False)[0].outputs[0].token_ids
    assert got == exp
    assert got != plain and got[0] != plain[0]


def test_logit_bias_forces_sampled_tokens_and_keeps_raw_logprobs(llm, tiny_llama):
    """+100 on one token makes every sampled token that one (temperature 1 with top-p and top-k), beside an
    unbiased request in the same batch that is unaffected; the forced token's reported logprob is its unbiased
    log-softmax (logprobs are the raw model's)."""
    p, q = _prompt(14), _prompt(15)
    forced = SamplingParams(temperature=1.0, top_p=0.9, top_k=50, seed=5, max_tokens=6, ignore_eos=True,
                            logit_bias={321: 100.0}, logprobs=0)
    other = SamplingParams(temperature=1.0, seed=6, max_tokens=6, ignore_eos=True)
    alone = llm.generate([q], other, use_tqdm=False)[0].outputs[0].token_ids
    outs = llm.generate([p, q], [forced, other], use_tqdm=False)
    out = outs[0].outputs[0]
    assert out.token_ids == [321] * 6
    assert outs[1].outputs[0].token_ids == alone
    raw = torch.log_softmax(hf_logits(hf_model(tiny_llama), p)[-1], dim=-1)[321].item()
    assert abs(out.logprobs[0][321].logprob - raw) < 1e-4


def test_batched_biases_penalties_and_bans_match_the_per_element_formulas():
    """The sampler's batched logit_bias, penalties (repetition: HF's, on prompt + output; presence / frequency:
    OpenAI's, on output) and min_tokens bans change exactly the elements the per-token formulas say, each row by
    its own params, and leave a row not listed (index 2) alone."""
    from tachyon.engine.penalty_counts import PenaltyCounts
    from tachyon.engine.request import Request
    from tachyon.engine.sampler import apply_logit_biases, ban_stop_tokens

    def req(prompt, outputs, **kw):
        r = Request("r", prompt, SamplingParams(**kw), eos_token_ids=[0], max_model_len=100, sample_seed=0)
        for t in outputs:
            r.append_token(t)
        return r

    reqs = [req([1, 2], [5, 5, 7], presence_penalty=0.5, frequency_penalty=0.25, logit_bias={4: 2.0, 9: -1.5}),
            req([3, 3], [6], repetition_penalty=1.5, stop_token_ids=[8]),
            req([4], [4, 1], repetition_penalty=2.0, frequency_penalty=-0.5, logit_bias={1: 0.75})]
    rows = [0, 1, 3]
    torch.manual_seed(0)
    logits = torch.randn(4, 10)
    exp = logits.clone()
    for row, r in zip(rows, reqs):
        p, x = r.params, exp[row]
        for t, b in (p.logit_bias or {}).items():
            x[t] += b
        for t in set(r.token_ids):
            if p.repetition_penalty != 1.0:
                x[t] = x[t] / p.repetition_penalty if x[t] > 0 else x[t] * p.repetition_penalty
        for t in set(r.output_token_ids):
            x[t] -= p.frequency_penalty * r.output_token_ids.count(t) + p.presence_penalty
        for t in (*r.eos_token_ids, *p.stop_token_ids):
            x[t] = float("-inf")
    got = logits.clone()
    biased = [k for k, r in enumerate(reqs) if r.params.logit_bias]
    apply_logit_biases(got, [rows[k] for k in biased], [reqs[k] for k in biased])
    PenaltyCounts().apply(got, rows, reqs)
    ban_stop_tokens(got, rows, reqs)
    assert torch.allclose(got, exp, atol=1e-6)
    assert torch.equal(got[2], logits[2])
    assert not torch.equal(got[3], logits[3])


@pytest.mark.parametrize("top_k,top_p,min_p", [(3, 1.0, 0.0), (0, 0.6, 0.0), (0, 1.0, 0.2), (4, 0.9, 0.05)])
def test_sampling_distribution_matches_filtered_softmax(top_k, top_p, min_p):
    """Empirical frequencies of the engine's draw match the filtered distribution computed independently
    (top-k, then top-p over the renormalised survivors, then min-p), and the draw is seed-determined."""
    from tachyon.kernels import sample_ref

    torch.manual_seed(0)
    V, draws = 12, 3000
    logits = torch.randn(V) * 1.5
    probs = torch.softmax(logits.double() / 0.7, -1).tolist()
    ranked = sorted(range(V), key=lambda i: -probs[i])
    if top_k:
        ranked = ranked[:top_k]
    if top_p < 1.0:
        total = sum(probs[i] for i in ranked)
        kept, mass = [], 0.0
        for i in ranked:
            if mass >= top_p:
                break
            kept.append(i)
            mass += probs[i] / total
        ranked = kept
    if min_p:
        ranked = [i for i in ranked if probs[i] >= min_p * max(probs)]
    keep = torch.zeros(V, dtype=torch.bool)
    keep[ranked] = True
    target = torch.tensor([probs[i] if keep[i] else 0.0 for i in range(V)], dtype=torch.float32)
    target /= target.sum()
    rows = logits.expand(draws, V).contiguous()
    full = lambda v, dt: torch.full((draws,), v, dtype=dt)  # noqa: E731
    args = (full(0.7, torch.float32), full(top_k, torch.int32), full(top_p, torch.float32),
            full(min_p, torch.float32), full(42, torch.int64), torch.arange(draws))
    tokens = sample_ref(rows, *args)
    assert torch.equal(tokens, sample_ref(rows, *args))  # same (seed, step) -> same draw
    counts = torch.bincount(tokens, minlength=V).float()
    assert (counts[~keep] == 0).all()
    assert (counts / draws - target).abs().max() < 0.035


@pytest.mark.parametrize("b", range(1, 10))
def test_sampling_rows_are_16_byte_aligned_at_every_batch_size(b):
    """Triton specialises each pointer on 16-byte alignment: rows packed back to back compiled new variants of the
    sampling kernels for each batch size mod 4 on a live request (stop 66). Every tensor sampling_rows hands
    kernels.sample starts aligned and holds exactly the batch's values."""
    from tachyon.engine.sampler import sampling_rows

    temp = [0.5 + i for i in range(b)]
    top_k = [i + 1 for i in range(b)]
    top_p = [0.9 - 0.01 * i for i in range(b)]
    min_p = [0.01 * i for i in range(b)]
    seed = [1000 + i for i in range(b)]
    step = [3 * i for i in range(b)]
    out = sampling_rows(temp, top_k, top_p, min_p, seed, step, torch.device("cpu"))
    want = [(temp, torch.float32), (top_k, torch.int32), (top_p, torch.float32), (min_p, torch.float32),
            (seed, torch.int64), (step, torch.int64)]
    for t, (values, dtype) in zip(out, want, strict=True):
        assert t.dtype == dtype and t.shape == (b,) and t.is_contiguous()
        assert t.data_ptr() % 16 == 0, (b, dtype, t.data_ptr() % 16)
        assert torch.equal(t, torch.tensor(values, dtype=dtype))
