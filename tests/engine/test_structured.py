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


@pytest.mark.parametrize("overlap", [False, True])
def test_structured_outputs_survive_preemption(tiny_llama, overlap):
    """Preemption recomputes a request's KV, never its tokens, so its matcher stays in step: a KV cache small
    enough to preempt gives the same (valid) outputs as a roomy one, with steps run synchronously and with decode
    steps launched (the structured rows redrawn, their matchers fed as the tokens reach the host)."""
    sp = SamplingParams(temperature=1.0, seed=10, max_tokens=50,
                        structured_outputs=StructuredOutputsParams(json=SCHEMA))
    prompts = [[20 + i] * 10 for i in range(6)]
    roomy = LLM(tiny_llama, device="cpu", dtype="float32", max_model_len=64)
    ref = [o.outputs[0].text for o in roomy.generate(prompts, sp, use_tqdm=False)]
    tight = LLM(tiny_llama, device="cpu", dtype="float32", max_model_len=64, num_kv_blocks=20, block_size=4,
                overlap_scheduling=overlap)
    got = [o.outputs[0].text for o in tight.generate(prompts, sp, use_tqdm=False)]
    assert tight.engine.scheduler.num_preemptions > 0
    assert (tight.engine.runner.num_rows_redrawn > 0) == overlap
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


def test_mask_prefetch_serves_reordered_and_new_rows(llm):
    """MaskPrefetch.take returns exactly fill_bitmask's rows for any order of matchers, prefetched or not (a new
    request's are filled on the spot), and counts the rows it served from the prefetch."""
    import torch

    from tachyon.engine.structured import MaskPrefetch, fill_bitmask

    engine = llm.engine
    tok, vocab, eos = engine.tokenizer, engine.spec.vocab_size, engine.spec.eos_token_ids
    specs = [StructuredOutputsParams(json=SCHEMA), StructuredOutputsParams(regex="[0-9]+x"),
             StructuredOutputsParams(choice=["ab", "abc"]), StructuredOutputsParams(choice=["z"])]
    a, b, c, d = (engine.grammars.matcher(s) for s in specs)
    assert b.consume_tokens(tok.encode("12", add_special_tokens=False))
    assert d.consume_tokens(tok.encode("z", add_special_tokens=False)) and d.is_stopped()
    pf = MaskPrefetch()
    pf.start([a, b, d], [eos] * 3, vocab)
    got = pf.take([d, c, a], [eos] * 3, vocab)
    assert torch.equal(got, fill_bitmask([d, c, a], [eos] * 3, vocab)) and pf.rows_prefetched == 2
    pf.start([a, b], [eos] * 2, vocab)
    assert torch.equal(pf.take([a, b], [eos] * 2, vocab), fill_bitmask([a, b], [eos] * 2, vocab))
    assert pf.rows_prefetched == 4
    assert torch.equal(pf.take([c], [eos], vocab), fill_bitmask([c], [eos], vocab)) and pf.rows_prefetched == 4


def test_prefetched_masks_give_the_same_outputs(tiny_llama, monkeypatch):
    """Structured outputs (JSON, sampled, n=2, beside a plain row) are the same tokens whether the next step's
    masks are prefetched in the background or filled when the step samples, and the prefetch served most rows."""
    from tachyon.engine.structured import MaskPrefetch

    sp = SamplingParams(temperature=1.0, seed=11, n=2, max_tokens=60,
                        structured_outputs=StructuredOutputsParams(json=SCHEMA))
    other = SamplingParams(temperature=1.0, seed=12, max_tokens=20, ignore_eos=True)

    def run():
        llm = LLM(tiny_llama, device="cpu", dtype="float32", max_model_len=256)
        outs = llm.generate([PROMPTS[0], PROMPTS[1], [11, 12, 13]], [sp, sp, other], use_tqdm=False)
        return [c.token_ids for o in outs for c in o.outputs], llm.engine.runner.sampler.masks.rows_prefetched

    with_prefetch, served = run()
    monkeypatch.setattr(MaskPrefetch, "start", lambda self, *a: None)
    without, none = run()
    assert with_prefetch == without and none == 0
    n_tokens = sum(len(t) for t in with_prefetch[:4])
    assert served >= n_tokens - 4 * 2, (served, n_tokens)  # all but each row's first mask (and a prompt's end)


def test_bad_grammar_fails_without_the_llguidance_tokenizer(llm, monkeypatch):
    """Grammars are validated before the (~0.4 s) llguidance tokenizer is built: bad input is rejected in
    milliseconds even by a compiler that has none yet; a good grammar still gets a matcher."""
    from tachyon.engine.structured import GrammarCompiler

    engine = llm.engine
    fresh = GrammarCompiler(engine.tokenizer, engine.spec.vocab_size, engine.spec.eos_token_ids)

    def no_tokenizer():
        raise AssertionError("built the llguidance tokenizer for a grammar that does not compile")

    monkeypatch.setattr(fresh, "_ll_tokenizer", no_tokenizer)
    for spec, field in [(StructuredOutputsParams(regex="[a-"), "regex"),
                        (StructuredOutputsParams(grammar="start: missing_rule"), "grammar"),
                        (StructuredOutputsParams(json={"type": "strin"}), "json")]:
        with pytest.raises(ValueError, match=re.escape(f"structured_outputs.{field}: ")):
            fresh.matcher(spec)
    monkeypatch.undo()
    assert not fresh.matcher(StructuredOutputsParams(regex="[a-z]+")).is_error()


def test_prepare_builds_the_tokenizer_and_swallows_failure(llm):
    from tachyon.engine.structured import GrammarCompiler

    engine = llm.engine
    ready = GrammarCompiler(engine.tokenizer, engine.spec.vocab_size, engine.spec.eos_token_ids)
    ready.prepare()
    assert ready._lltok is not None
    none = GrammarCompiler(None, engine.spec.vocab_size, engine.spec.eos_token_ids)
    none.prepare()  # no tokenizer: nothing built, nothing raised; the request that needs it says why
    with pytest.raises(ValueError, match="needs a tokenizer"):
        none.matcher(StructuredOutputsParams(regex="a"))


def test_async_engine_prepares_grammars_in_the_background(tiny_llama):
    import time

    from tachyon.config import EngineConfig
    from tachyon.engine.async_engine import AsyncEngine

    eng = AsyncEngine(EngineConfig(model=tiny_llama, device="cpu", dtype="float32", max_model_len=256))
    try:
        for _ in range(300):
            if eng.engine.grammars._lltok is not None:
                break
            time.sleep(0.02)
        assert eng.engine.grammars._lltok is not None
    finally:
        eng.shutdown()
