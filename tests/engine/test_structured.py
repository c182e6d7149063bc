"""Structured outputs (StructuredOutputsParams through llguidance), checked by independent validators: `jsonschema`
for JSON schemas, `json` for JSON objects, Python's `re` for regexes, plain membership for choices."""

import json
import re

import jsonschema
import pytest

from tachyon import LLM, SamplingParams, StructuredOutputsParams

SCHEMA = {
    "type": "object",
    "properties": {
        "ok": {"type": "boolean"},
        "colour": {"enum": ["red", "green", "blue"]},
        "count": {"type": "integer", "minimum": 0, "maximum": 999},
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3},
    },
    "required": ["ok", "colour", "count", "tags"],
    "additionalProperties": False,
}
PROMPTS = ["Describe the weather.", [5, 6, 7, 8, 9], "Reply in JSON please"]


def _texts(llm, params, prompts=PROMPTS):
    outs = llm.generate(prompts, params, use_tqdm=False)
    return [c for o in outs for c in o.outputs]


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_json_schema_outputs_validate(llm, temperature):
    """Every output, greedy and sampled (n=2), ends by itself and validates against the schema; the overlap engine
    (the `llm` fixture) runs structured rows synchronously, or a raw draw would break the grammar."""
    sp = SamplingParams(temperature=temperature, seed=3, n=2, max_tokens=80,
                        structured_outputs=StructuredOutputsParams(json=SCHEMA))
    for c in _texts(llm, sp):
        assert c.finish_reason == "stop", c.text
        jsonschema.validate(json.loads(c.text), SCHEMA)


def test_json_schema_as_string_and_json_text_layout(llm):
    """A schema given as a JSON string works the same; the text uses json.dumps' separators (no free whitespace,
    which a weak model could spend its whole output on)."""
    sp = SamplingParams(temperature=1.0, seed=4, max_tokens=80,
                        structured_outputs=StructuredOutputsParams(json=json.dumps(SCHEMA)))
    for c in _texts(llm, sp):
        value = json.loads(c.text)
        jsonschema.validate(value, SCHEMA)
        assert c.text == json.dumps(value)


def test_regex_and_choice(llm):
    sp = SamplingParams(temperature=1.0, seed=5, n=3, max_tokens=20,
                        structured_outputs=StructuredOutputsParams(regex=r"[0-9]{3}-[a-z]{2}(!|\?)"))
    for c in _texts(llm, sp):
        assert c.finish_reason == "stop" and re.fullmatch(r"[0-9]{3}-[a-z]{2}(!|\?)", c.text), c.text
    choices = ["yes", "no", "not sure (a+b)*"]
    sp = SamplingParams(temperature=1.0, seed=6, n=4, max_tokens=20,
                        structured_outputs=StructuredOutputsParams(choice=choices))
    got = {c.text for c in _texts(llm, sp)}
    assert got <= set(choices) and len(got) >= 2


def test_lark_grammar(llm):
    grammar = 'start: "(" num ("," num)* ")"\nnum: /[1-9][0-9]?/'
    sp = SamplingParams(temperature=1.0, seed=7, n=2, max_tokens=40,
                        structured_outputs=StructuredOutputsParams(grammar=grammar))
    for c in _texts(llm, sp):
        if c.finish_reason == "stop":
            assert re.fullmatch(r"\([1-9][0-9]?(,[1-9][0-9]?)*\)", c.text), c.text
        else:  # cut by max_tokens: still a prefix of the language
            assert re.fullmatch(r"\([1-9][0-9]?(,[1-9][0-9]?)*,?", c.text), c.text


def test_structured_row_leaves_its_batch_alone(llm):
    """A constrained request beside an unconstrained one: the other row's tokens equal its run alone."""
    other = SamplingParams(temperature=1.0, seed=8, max_tokens=12, ignore_eos=True)
    alone = llm.generate([[11, 12, 13]], other, use_tqdm=False)[0].outputs[0].token_ids
    constrained = SamplingParams(temperature=1.0, seed=9, max_tokens=80,
                                 structured_outputs=StructuredOutputsParams(json=SCHEMA))
    outs = llm.generate([PROMPTS[0], [11, 12, 13]], [constrained, other], use_tqdm=False)
    jsonschema.validate(json.loads(outs[0].outputs[0].text), SCHEMA)
    assert outs[1].outputs[0].token_ids == alone


def test_structured_outputs_survive_preemption(tiny_llama):
    """Preemption recomputes a request's KV, never its tokens, so its matcher stays in step: a KV cache small
    enough to preempt gives the same (valid) outputs as a roomy one."""
    sp = SamplingParams(temperature=1.0, seed=10, max_tokens=50,
                        structured_outputs=StructuredOutputsParams(json=SCHEMA))
    prompts = [[20 + i] * 10 for i in range(6)]
    roomy = LLM(tiny_llama, device="cpu", dtype="float32", max_model_len=64)
    ref = [o.outputs[0].text for o in roomy.generate(prompts, sp, use_tqdm=False)]
    tight = LLM(tiny_llama, device="cpu", dtype="float32", max_model_len=64, num_kv_blocks=20, block_size=4)
    got = [o.outputs[0].text for o in tight.generate(prompts, sp, use_tqdm=False)]
    assert tight.engine.scheduler.num_preemptions > 0
    assert got == ref
    for text in got:
        jsonschema.validate(json.loads(text), SCHEMA)


def test_json_object_from_the_default_model(smollm2_gguf):
    """json_object on the real default model (SmolLM2-135M-Instruct, greedy) asked for JSON: a JSON object."""
    llm = LLM(None, device="cpu", dtype="float32", max_model_len=512)
    sp = SamplingParams(temperature=0, max_tokens=120, structured_outputs=StructuredOutputsParams(json_object=True))
    msgs = [{"role": "user", "content": "Give a JSON object with the name and age of a fictional person."}]
    out = llm.chat(msgs, sp, use_tqdm=False)[0].outputs[0]
    assert out.finish_reason == "stop", out.text
    assert isinstance(json.loads(out.text), dict)


def test_mask_logits_matches_llguidance_per_matcher(llm):
    """mask_logits (one bitmask for all rows, unpacked on the device) against each matcher's own byte mask
    (llguidance's compute_logit_bias: 200 allowed, 0 not), rows in any order, other rows untouched; a stopped
    matcher allows only its EOS ids (here also ids on a word's sign bit and its lowest bit)."""
    import torch

    from tachyon.engine.structured import mask_logits

    engine = llm.engine
    vocab, eos = engine.spec.vocab_size, engine.spec.eos_token_ids
    specs = [StructuredOutputsParams(json=SCHEMA), StructuredOutputsParams(regex="[0-9]+x"),
             StructuredOutputsParams(choice=["ab", "abc"]), StructuredOutputsParams(choice=["z"])]
    matchers = [engine.grammars.matcher(s) for s in specs]
    tok = engine.tokenizer
    assert matchers[1].consume_tokens(tok.encode("12", add_special_tokens=False))
    assert matchers[3].consume_tokens(tok.encode("z", add_special_tokens=False)) and matchers[3].is_stopped()
    logits = torch.randn(6, vocab)
    rows = [4, 0, 2, 5]
    out = logits.clone()
    eos_lists = [eos, eos, eos, [*eos, 31, 32, 95]]
    mask_logits(out, rows, matchers, eos_lists)
    for r, m, e in zip(rows, matchers, eos_lists):
        if m.is_stopped():
            want = torch.zeros(vocab, dtype=torch.bool)
            want[e] = True
        else:
            want = torch.frombuffer(bytearray(m.compute_logit_bias()), dtype=torch.uint8)[:vocab] > 0
        assert torch.equal(torch.isfinite(out[r]), want)
        assert torch.equal(out[r][want], logits[r][want])
    for r in (1, 3):
        assert torch.equal(out[r], logits[r])


@pytest.mark.parametrize("kwargs,match", [
    (dict(), "exactly one of"),
    (dict(regex="a", choice=["a"]), "exactly one of"),
    (dict(choice=[]), "choice must be a non-empty list"),
    (dict(json=5), "JSON schema"),
    (dict(regex=""), "regex must be a non-empty string"),
])
def test_structured_outputs_params_reject(kwargs, match):
    with pytest.raises(ValueError, match=match):
        StructuredOutputsParams(**kwargs)


def test_bad_grammars_and_combinations_name_the_field(llm):
    for spec, match in [(StructuredOutputsParams(regex="[a-"), "structured_outputs.regex"),
                        (StructuredOutputsParams(grammar="start: missing_rule"), "structured_outputs.grammar"),
                        (StructuredOutputsParams(json="{not json"), "structured_outputs.json is not valid JSON")]:
        with pytest.raises(ValueError, match=re.escape(match)):
            llm.generate(["x"], SamplingParams(structured_outputs=spec), use_tqdm=False)
    with pytest.raises(ValueError, match="ignore_eos or min_tokens"):
        SamplingParams(ignore_eos=True, structured_outputs=StructuredOutputsParams(choice=["a"]))
    assert not llm.engine.has_unfinished()


class _SetMatcher:
    """A matcher stand-in whose language allows one fixed token set at every step."""

    def __init__(self, allowed: set[int]):
        self.allowed, self.tries, self.consumed = allowed, 0, []

    def is_stopped(self) -> bool:
        return False

    def is_error(self) -> bool:
        return False

    def try_consume_tokens(self, tokens: list[int]) -> int:
        self.tries += 1
        if tokens[0] in self.allowed:
            self.consumed.append(tokens[0])
            return 1
        return 0

    def consume_token(self, token: int) -> bool:
        self.consumed.append(token)
        return token in self.allowed


def test_raw_draw_first_is_exact_rejection_sampling(monkeypatch):
    """Unfiltered structured rows draw unmasked first and redraw from the masked logits only when the matcher
    rejects the token. Over 6,000 seeds the tokens' frequencies match softmax(logits / T) restricted to the allowed
    set (an independent computation; bound: 5 standard errors a token), every token is allowed, a good share of
    rows were redrawn (the path really ran), and greedy rows give the masked argmax. A top-p row masks first (its
    filter is computed over the masked logits): its matcher is never asked to try a token."""
    import torch

    from tachyon.engine import sampler as sampler_mod
    from tachyon.engine.request import Request

    def fake_mask(logits, rows, matchers, eos):
        for r, m in zip(rows, matchers):
            keep = torch.zeros(logits.shape[-1], dtype=torch.bool)
            keep[sorted(m.allowed)] = True
            logits[r] = logits[r].masked_fill(~keep, float("-inf"))

    monkeypatch.setattr(sampler_mod, "mask_logits", fake_mask)
    allowed = {1, 4, 5, 9}
    torch.manual_seed(0)
    row = torch.randn(12) * 1.5
    n, temp = 6000, 0.7

    def requests(**kw):
        reqs = []
        for i in range(n):
            sp = SamplingParams(seed=i, structured_outputs=StructuredOutputsParams(choice=["stand-in"]), **kw)
            r = Request(f"r{i}", [3], sp, eos_token_ids=[0], max_model_len=100, sample_seed=i)
            r.matcher = _SetMatcher(allowed)
            reqs.append(r)
        return reqs

    reqs = requests(temperature=temp)
    tokens = sampler_mod.Sampler()(row.repeat(n, 1), reqs).token_ids
    assert set(tokens) <= allowed
    assert all(r.matcher.tries == 1 and r.matcher.consumed[-1] == t for r, t in zip(reqs, tokens))
    redrawn = sum(r.raw_draw_misses for r in reqs)
    p = torch.softmax(row.double() / temp, -1)
    p_allowed = float(p[sorted(allowed)].sum())
    assert abs(redrawn / n - (1 - p_allowed)) < 5 * (p_allowed * (1 - p_allowed) / n) ** 0.5 and redrawn > n // 10
    for t in allowed:
        want = float(p[t]) / p_allowed
        got = tokens.count(t) / n
        assert abs(got - want) < 5 * (want * (1 - want) / n) ** 0.5 + 1e-9, (t, got, want)

    greedy = requests(temperature=0.0)[:3]
    masked_argmax = max(allowed, key=lambda t: float(row[t]))
    assert int(row.argmax()) not in allowed  # the raw argmax is rejected here, so the redraw decides
    assert sampler_mod.Sampler()(row.repeat(3, 1), greedy).token_ids == [masked_argmax] * 3

    filtered = requests(temperature=temp, top_p=0.9)[:50]
    tokens = sampler_mod.Sampler()(row.repeat(50, 1), filtered).token_ids
    assert set(tokens) <= allowed and all(r.matcher.tries == 0 for r in filtered)


def test_rows_that_keep_missing_mask_first_and_retry_every_8th_token():
    """After RAW_DRAW_MAX_MISSES rejected raw draws in a row a structured row masks first, except on every
    RAW_DRAW_RETRY_EVERY-th output token; an accepted raw draw resets the count."""
    from tachyon.engine import sampler as sampler_mod
    from tachyon.engine.request import Request

    r = Request("r", [3], SamplingParams(temperature=1.0), eos_token_ids=[0], max_model_len=100, sample_seed=0)
    r.matcher = _SetMatcher({1})
    assert sampler_mod.tries_raw_draw(r, 12)
    r.raw_draw_misses = sampler_mod.RAW_DRAW_MAX_MISSES
    for t in range(1, 2 * sampler_mod.RAW_DRAW_RETRY_EVERY + 1):
        r.append_token(1)
        assert sampler_mod.tries_raw_draw(r, 12) == (t % sampler_mod.RAW_DRAW_RETRY_EVERY == 0)


def test_matcher_accepts_exactly_the_tokens_its_mask_allows(llm):
    """The raw-draw path's test (try_consume_tokens on a copy) agrees with the mask on every token of the
    vocabulary, EOS included, in a JSON string, after a key, in an accepting regex state and at a choice's end."""
    import torch

    engine = llm.engine
    tok, vocab, eos = engine.tokenizer, engine.spec.vocab_size, engine.spec.eos_token_ids
    states = [(StructuredOutputsParams(json={"type": "object", "properties": {"t": {"type": "string"}}}),
               '{"t": "ab'),
              (StructuredOutputsParams(json=SCHEMA), '{"ok": true, "colour": '),
              (StructuredOutputsParams(regex="[0-9]+(x|yz)?"), "12"),
              (StructuredOutputsParams(choice=["ab", "abc"]), "ab")]
    for spec, prefix in states:
        m = engine.grammars.matcher(spec)
        assert m.consume_tokens(tok.encode(prefix, add_special_tokens=False))
        want = torch.frombuffer(bytearray(m.compute_logit_bias()), dtype=torch.uint8)[:vocab] > 0
        got = torch.tensor([bool(m.deep_copy().try_consume_tokens([t])) for t in range(vocab)])
        assert torch.equal(got, want), (prefix, (got != want).nonzero().flatten()[:10].tolist())
        assert want[eos].any() == m.is_accepting()


def test_greedy_json_from_the_default_model_skips_most_masks(smollm2_gguf, monkeypatch):
    """SmolLM2-135M-Instruct (greedy) asked for JSON under a schema: the same text with the raw-draw path as with
    masks on every token, and far fewer masks computed (the model's own tokens mostly fit the grammar)."""
    from tachyon.engine import sampler as sampler_mod

    calls = []
    real_mask = sampler_mod.mask_logits

    def counting_mask(logits, rows, *args):
        calls.append(len(rows))
        return real_mask(logits, rows, *args)

    monkeypatch.setattr(sampler_mod, "mask_logits", counting_mask)
    llm = LLM(None, device="cpu", dtype="float32", max_model_len=512)
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 30},
                                               "age": {"type": "integer", "minimum": 0, "maximum": 150}},
              "required": ["name", "age"], "additionalProperties": False}
    sp = SamplingParams(temperature=0, max_tokens=60, structured_outputs=StructuredOutputsParams(json=schema))
    msgs = [{"role": "user", "content": "Give a JSON object with the name and age of a fictional person."}]
    fast = llm.chat(msgs, sp, use_tqdm=False)[0].outputs[0]
    masks_fast = sum(calls)
    monkeypatch.setattr(sampler_mod, "RAW_DRAW_MAX_MISSES", 0)
    monkeypatch.setattr(sampler_mod, "RAW_DRAW_RETRY_EVERY", 10**9)
    calls.clear()
    slow = llm.chat(msgs, sp, use_tqdm=False)[0].outputs[0]
    assert fast.token_ids == slow.token_ids and fast.finish_reason == "stop"
    jsonschema.validate(json.loads(fast.text), schema)
    assert sum(calls) == len(slow.token_ids)
    assert masks_fast <= len(fast.token_ids) // 2, (masks_fast, len(fast.token_ids))
