"""Output constraints through the official `openai` client against the shared live `tachyon serve`: structured
outputs, logit_bias and tool calls (forced, and "auto" through the server's hermes parser)."""

from __future__ import annotations

import json
import re

import httpx
import jsonschema
import pytest

from tests.serving.harness import REAL_ENGINE, main_server

MSGS = [{"role": "user", "content": "Tell me a story about a cat."}]
PROMPT = "The quick brown fox"


@pytest.fixture(scope="module")
def server():
    return main_server()


@pytest.fixture(scope="module")
def client(server):
    return server.openai(timeout=30)


def test_no_op_constraint_forms_served(client):
    """The no-op forms of the output constraints generate what the plain request does."""
    plain = dict(model="tiny", messages=MSGS, max_tokens=6, temperature=0, extra_body={"ignore_eos": True})
    want = client.chat.completions.create(**plain).choices[0].message.content
    got = client.chat.completions.create(
        **plain, response_format={"type": "text"}, logit_bias={}, tool_choice="none"
    ).choices[0].message.content
    assert got == want


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"enum": ["Paris", "Oslo"]}, "unit": {"enum": ["C", "F"]}},
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "parameters": {"type": "object", "properties": {"zone": {"enum": ["UTC", "CET"]}}, "required": ["zone"],
                       "additionalProperties": False},
    },
}
PARAMS = {t["function"]["name"]: t["function"]["parameters"] for t in (WEATHER, TIME)}


@pytest.mark.skipif(not REAL_ENGINE, reason="needs the real engine")
def test_auto_tool_choice_with_the_hermes_parser(client):
    """tool_choice "auto" (the default with tools) on a server started with --tool-call-parser hermes: the model's
    text (forced here by guided_regex, as the tiny model knows no tools) becomes content plus tool_calls when it
    holds <tool_call> blocks, and stays content when it does not; streamed, no tag leaks into the content deltas."""
    call = '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "C"}}</tool_call>'
    text = "Let me check." + call + call.replace("Oslo", "Paris")
    kw = dict(model="tiny", messages=MSGS, max_tokens=80, tools=[WEATHER, TIME],
              extra_body={"guided_regex": re.escape(text)})
    m = client.chat.completions.create(**kw).choices[0]
    assert m.finish_reason == "tool_calls" and m.message.content == "Let me check."
    assert [json.loads(c.function.arguments)["city"] for c in m.message.tool_calls] == ["Oslo", "Paris"]
    _check_calls(m.message.tool_calls, {"get_weather"})
    chunks = [ch for ch in client.chat.completions.create(**kw, stream=True) if ch.choices]
    streamed = "".join(ch.choices[0].delta.content or "" for ch in chunks)
    calls = [d for ch in chunks for d in (ch.choices[0].delta.tool_calls or [])]
    assert streamed == "Let me check." and [d.index for d in calls] == [0, 1]
    assert [d.function.arguments for d in calls] == [c.function.arguments for c in m.message.tool_calls]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    plain = client.chat.completions.create(**dict(kw, extra_body={"guided_regex": "It is sunny<tool"}))
    assert plain.choices[0].message.content == "It is sunny<tool" and plain.choices[0].message.tool_calls is None
    assert plain.choices[0].finish_reason == "stop"


def _check_calls(calls, names):
    assert calls and len({c.id for c in calls}) == len(calls)
    for c in calls:
        assert c.type == "function" and c.id.startswith("call_") and c.function.name in names
        jsonschema.validate(json.loads(c.function.arguments), PARAMS[c.function.name])


@pytest.mark.skipif(not REAL_ENGINE, reason="needs the real engine")
def test_forced_tool_calls_through_the_openai_client(client):
    """A named function and "required" (two tools, one call), streamed and not: the client parses tool_calls whose
    arguments validate against the tool's schema; a call cut short by max_tokens stays text; the streamed call equals
    the non-streamed one (same seed); a follow-up turn with the call and the tool's answer in its history is
    served."""
    named = dict(model="tiny", messages=MSGS, max_tokens=60, temperature=1.0, seed=4, tools=[WEATHER, TIME],
                 tool_choice={"type": "function", "function": {"name": "get_weather"}})
    r = client.chat.completions.create(**named)
    c = r.choices[0]
    assert c.finish_reason == "stop" and c.message.content is None and len(c.message.tool_calls) == 1
    _check_calls(c.message.tool_calls, {"get_weather"})
    required = dict(named, tool_choice="required", seed=5, n=2, parallel_tool_calls=False)
    r = client.chat.completions.create(**required)
    for c in r.choices:
        assert c.finish_reason == "tool_calls" and len(c.message.tool_calls) == 1
        _check_calls(c.message.tool_calls, {"get_weather", "get_time"})
    cut = client.chat.completions.create(**dict(required, parallel_tool_calls=True, max_tokens=8)).choices[0]
    assert cut.finish_reason == "length" and cut.message.tool_calls is None  # an unfinished call stays text
    assert cut.message.content.startswith('[{"name": ')
    want = client.chat.completions.create(**named).choices[0].message.tool_calls[0].function
    chunks = list(client.chat.completions.create(**named, stream=True))
    deltas = [d for ch in chunks if ch.choices for d in (ch.choices[0].delta.tool_calls or [])]
    assert len(deltas) == 1 and deltas[0].index == 0 and deltas[0].id.startswith("call_")
    assert (deltas[0].function.name, deltas[0].function.arguments) == (want.name, want.arguments)
    assert [ch.choices[0].finish_reason for ch in chunks if ch.choices][-1] == "stop"
    history = MSGS + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": want.name, "arguments": want.arguments}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18 degrees, sunny"},
    ]
    r = client.chat.completions.create(model="tiny", messages=history, max_tokens=5, tools=[WEATHER],
                                       tool_choice="none")
    assert r.choices[0].message.content is not None and r.choices[0].message.tool_calls is None


SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}, "colour": {"enum": ["red", "green"]}},
    "required": ["ok", "colour"],
    "additionalProperties": False,
}


@pytest.mark.skipif(not REAL_ENGINE, reason="needs the real engine")
def test_structured_outputs_through_the_openai_client(client):
    """response_format json_schema (chat, streamed and not), json_object, and vLLM's guided_choice / guided_regex:
    each output validates (jsonschema, json, membership, re)."""
    rf = {"type": "json_schema", "json_schema": {"name": "answer", "schema": SCHEMA, "strict": True}}
    kw = dict(model="tiny", messages=MSGS, max_tokens=60, temperature=1.0, seed=1, response_format=rf)
    r = client.chat.completions.create(**kw)
    assert r.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(r.choices[0].message.content), SCHEMA)
    streamed = "".join(ch.choices[0].delta.content or "" for ch in client.chat.completions.create(**kw, stream=True)
                       if ch.choices)
    assert streamed == r.choices[0].message.content
    r = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=60, temperature=0,
                                  extra_body={"guided_json": SCHEMA})
    jsonschema.validate(json.loads(r.choices[0].text), SCHEMA)
    r = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=10, temperature=1.0, n=4, seed=2,
                                  extra_body={"guided_choice": ["alpha", "beta"]})
    assert {c.text for c in r.choices} <= {"alpha", "beta"}
    r = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=10, temperature=1.0, seed=3,
                                  extra_body={"structured_outputs": {"regex": "[0-9]{4}"}})
    assert re.fullmatch("[0-9]{4}", r.choices[0].text)


@pytest.mark.skipif(not REAL_ENGINE, reason="needs the real engine")
def test_logit_bias_forces_greedy_and_sampled_tokens(server, client):
    """OpenAI's logit_bias through the official client: +100 on one token makes every greedy and sampled token that
    one (the engine's own semantics are checked against transformers in tests/engine/test_sampling.py)."""
    target = 42
    det = httpx.post(
        server.url + "/detokenize", headers=server.headers(), json={"model": "tiny", "tokens": [target] * 5}
    )
    for temperature in (0, 1.0):
        r = client.completions.create(
            model="tiny", prompt=PROMPT, max_tokens=5, temperature=temperature, seed=3, logit_bias={str(target): 100},
            extra_body={"ignore_eos": True, "skip_special_tokens": False},
        )
        assert r.choices[0].text == det.json()["prompt"]
