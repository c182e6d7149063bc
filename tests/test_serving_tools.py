"""serving/tools.py on its own: tool_choice plans, the tool-call parsers and the streaming hold-back (the wire format
is checked through the openai client in test_serving_api.py)."""

import json

import jsonschema
import pytest

from tachyon.serving.errors import APIError
from tachyon.serving.tools import split_output, streamable, tool_plan

TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {
    "type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}},
    {"type": "function", "function": {"name": "g"}}]
AUTO = tool_plan(TOOLS, "auto", parser="hermes")


def test_auto_needs_a_parser_and_none_or_no_tools_plan_nothing():
    with pytest.raises(APIError) as e:
        tool_plan(TOOLS, None)  # "auto" is the default with tools
    assert e.value.param == "tool_choice" and "--tool-call-parser" in e.value.message
    assert tool_plan(TOOLS, "none") is None and tool_plan(None, None) is None and tool_plan([], "auto") is None
    assert AUTO.constraint is None and AUTO.names == {"f", "g"}


def test_required_and_named_constraints():
    req = tool_plan(TOOLS, "required", parallel_tool_calls=False)
    schema = req.constraint.json
    jsonschema.validate([{"name": "f", "arguments": {"x": 1}}], schema)
    for bad in ([], [{"name": "f", "arguments": {}}], [{"name": "h", "arguments": {}}],
                [{"name": "g", "arguments": {}}] * 2):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
    named = tool_plan(TOOLS, {"type": "function", "function": {"name": "g"}})
    assert named.name == "g" and named.constraint.json == {"type": "object"} and named.finish_reason == "stop"
    content, calls = split_output(named, '{"y": [1, 2]}')
    assert content is None and calls[0]["function"] == {"name": "g", "arguments": '{"y": [1, 2]}'}
    assert split_output(named, '{"y": [1,') == ('{"y": [1,', None)


@pytest.mark.parametrize("text,content,calls", [
    ("plain answer", "plain answer", None),
    ('Sure.<tool_call>{"name": "f", "arguments": {"x": 3}}</tool_call>', "Sure.", [("f", {"x": 3})]),
    ('<tool_call>\n{"name": "f", "arguments": {"x": 1}}\n</tool_call>\n<tool_call>{"name": "g", "parameters": {}}'
     '</tool_call>', None, [("f", {"x": 1}), ("g", {})]),
    ('<tool_call>{"name": "h", "arguments": {}}</tool_call>', None, None),  # not a tool: the text stays content
    ('<tool_call>{"name": "f", "arguments": </tool_call>', None, None),  # not JSON
    ('<tool_call>{"name": "f", "arguments": {"x": 1}}', None, None),  # unclosed
])
def test_hermes_parser(text, content, calls):
    _check_split(AUTO, text, content, calls)


def _check_split(plan, text: str, content: str | None, calls: list | None) -> None:
    """split_output(plan, text): `calls` (name, arguments) with their own ids and `content` beside them; with no
    calls, the whole text stays content."""
    got_content, got_calls = split_output(plan, text)
    if calls is None:
        assert got_content == text and got_calls is None
        return
    assert got_content == content
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in got_calls] == calls
    assert len({c["id"] for c in got_calls}) == len(got_calls)


@pytest.mark.parametrize("text,n", [
    ("Hello", 5), ("Hello <tool", 6), ("Hello <", 6), ("a<tool_call>{", 1), ("<tool_call", 0), ("x < y", 5),
])
def test_streamable_holds_back_what_may_become_a_tag(text, n):
    assert streamable(AUTO, text) == n
    assert streamable(tool_plan(TOOLS, "required"), text) == 0


LLAMA = tool_plan(TOOLS, "auto", parser="llama3_json")


@pytest.mark.parametrize("text,calls", [
    ('{"name": "f", "parameters": {"x": 2}}', [("f", {"x": 2})]),
    ('<|python_tag|>{"name": "f", "arguments": {"x": 1}}; {"name": "g", "parameters": {}}', [("f", {"x": 1}),
                                                                                            ("g", {})]),
    (' \n{"name": "g", "parameters": {"a": [1]}}\n', [("g", {"a": [1]})]),
    ("The answer is 4.", None),
    ('{"name": "f", "parameters": {"x": 2}} and some words', None),
    ('{"name": "nope", "parameters": {}}', None),
    ('{"name": "f", "parameters": {"x": 2}', None),
    ('{"name": "f", "parameters": 3}', None),
])
def test_llama3_json_parser(text, calls):
    _check_split(LLAMA, text, None, calls)


@pytest.mark.parametrize("text,n", [
    ("Sure", 4), ("  ", 0), (' {"na', 0), ("<|py", 0), ("<|python_tag|>{", 0), ("I think {", 9),
])
def test_llama3_json_streams_only_what_cannot_be_a_call(text, n):
    assert streamable(LLAMA, text) == n


def test_hermes_text_after_the_calls_keeps_it_all_content():
    text = '<tool_call>{"name": "f", "arguments": {"x": 3}}</tool_call> and then I made something up'
    assert split_output(AUTO, text) == (text, None)


# A template that shows what it is given: tool names, and each history call's arguments as the object it received.
TEMPLATE = ("{% for t in tools or [] %}[tool {{ t.function.name }}]{% endfor %}"
            "{% for m in messages %}<{{ m.role }}>{{ m.content }}"
            "{% for c in m.tool_calls or [] %}(call {{ c.function.name }} x={{ c.function.arguments.x }}){% endfor %}"
            "{% if m.tool_call_id %}(for {{ m.tool_call_id }}){% endif %}{% endfor %}")
HISTORY = [
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_7", "type": "function", "function": {"name": "f", "arguments": '{"x": 5}'}}]},
    {"role": "tool", "tool_call_id": "call_7", "content": "ok"},
]
RENDERED = "[tool f][tool g]<user>hi<assistant>(call f x=5)<tool>ok(for call_7)"


def test_tools_and_history_reach_the_chat_template(tiny_llama):
    """Both chat paths hand the template the tools, the history's calls (arguments parsed from OpenAI's JSON string,
    as templates read them) and tool_call_id: the server's chat_prompt and the offline LLM.chat."""
    import asyncio
    import types

    from transformers import AutoTokenizer

    from tachyon.engine.llm import chat_prompt_ids
    from tachyon.serving.preprocess import chat_prompt
    from tachyon.serving.protocol import ChatMessage

    tok = AutoTokenizer.from_pretrained(tiny_llama)
    tok.chat_template = TEMPLATE
    model = types.SimpleNamespace(tokenizer=tok, max_model_len=4096, max_token_chars=64)
    ids = asyncio.run(chat_prompt(model, [ChatMessage(**m) for m in HISTORY], add_generation_prompt=False,
                                  tools=TOOLS))
    assert tok.decode(ids) == RENDERED
    offline = [dict(m, tool_calls=[{**c, "function": {**c["function"], "arguments": {"x": 5}}} for c in
                                   m["tool_calls"]]) if m.get("tool_calls") else m for m in HISTORY]
    assert tok.decode(chat_prompt_ids(tok, offline, add_generation_prompt=False, tools=TOOLS)) == RENDERED


MISTRAL = tool_plan(TOOLS, "auto", parser="mistral")


@pytest.mark.parametrize("text,content,calls", [
    ('[TOOL_CALLS] [{"name": "f", "arguments": {"x": 3}}, {"name": "g", "arguments": {}}]', None,
     [("f", {"x": 3}), ("g", {})]),
    ('Let me check.[TOOL_CALLS][{"name": "f", "arguments": {"x": 1}}]', "Let me check.", [("f", {"x": 1})]),
    ('[TOOL_CALLS]f[ARGS]{"x": 5}[TOOL_CALLS]g[ARGS]{}', None, [("f", {"x": 5}), ("g", {})]),  # v11 pieces
    ("Just text.", None, None),
    ('[TOOL_CALLS] [{"name": "h", "arguments": {}}]', None, None),  # not a tool
    ('[TOOL_CALLS] [{"name": "f", "arguments": {"x": 3}}', None, None),  # cut short
    ('[TOOL_CALLS]f[ARGS]{"x": 5} and more', None, None),  # text after the arguments
    ('[TOOL_CALLS]f{"x": 5}', None, None),  # no [ARGS]
    ('[TOOL_CALLS] {"name": "f", "arguments": {"x": 3}}', None, None),  # v3 needs the list
])
def test_mistral_parser(text, content, calls):
    _check_split(MISTRAL, text, content, calls)


@pytest.mark.parametrize("text,n", [("Sure", 4), ("Sure [TOOL", 5), ("ok[TOOL_CALLS][", 2), ("[", 0), ("a [b]", 5)])
def test_mistral_streams_up_to_its_tag(text, n):
    assert streamable(MISTRAL, text) == n


def test_only_the_mistral_plan_keeps_special_tokens():
    """[TOOL_CALLS] is a special token: the request's text keeps special tokens under the mistral parser only."""
    assert MISTRAL.keeps_special_tokens
    assert not AUTO.keeps_special_tokens and not LLAMA.keeps_special_tokens
    assert not tool_plan(TOOLS, "required").keeps_special_tokens


PYTHONIC = tool_plan(TOOLS, "auto", parser="pythonic")


@pytest.mark.parametrize("text,calls", [
    ('[f(x=3)]', [("f", {"x": 3})]),
    ('[f(x=-2), g(a="b", l=[1, 2.5, None], d={"k": True}, j=true)]',
     [("f", {"x": -2}), ("g", {"a": "b", "l": [1, 2.5, None], "d": {"k": True}, "j": True})]),
    ('<|python_start|>[g()]<|python_end|>', [("g", {})]),
    (" \n[f(x=1)]\n", [("f", {"x": 1})]),
    ("The answer is [f(x=1)].", None),  # not the whole answer
    ("[h(x=1)]", None),  # not a tool
    ("[f(1)]", None),  # positional
    ("[f(x=y)]", None),  # not a literal
    ("[f(x=__import__('os'))]", None),  # nor a call
    ("[f(**{'x': 1})]", None),
    ("[f(x=1)", None),  # cut short
    ("[]", None),
    ("[f(x={1, 2})]", None),  # a set is not JSON
])
def test_pythonic_parser(text, calls):
    _check_split(PYTHONIC, text, None, calls)


@pytest.mark.parametrize("text,n", [("Sure", 4), ("  ", 0), (" [f(", 0), ("<|py", 0), ("I said [", 8)])
def test_pythonic_streams_only_what_cannot_be_a_call(text, n):
    assert streamable(PYTHONIC, text) == n


def test_unknown_tool_call_parser_names_the_known_ones():
    from tachyon.serving.config import ModelEntry, ServerConfig

    with pytest.raises(ValueError, match=r"tool_call_parser must be one of \['hermes', 'llama3_json', 'mistral', "
                                         r"'pythonic'\]"):
        ServerConfig(models=[ModelEntry(["m"], {"model": "m"})], tool_call_parser="qwen")


def test_keep_special_tokens_reaches_the_sampling_params():
    """build_params keeps special tokens in the text when the plan's parser reads them, whatever the request's
    skip_special_tokens says; otherwise the request decides."""
    from tachyon.serving.config import ModelEntry, ServerConfig
    from tachyon.serving.params import build_params
    from tachyon.serving.protocol import ChatCompletionRequest

    cfg = ServerConfig(models=[ModelEntry(["m"], {"model": "m"})], tool_call_parser="mistral")
    req = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "hi"}])
    kw = dict(max_tokens=8, logprobs=None, vocab_size=100)
    assert build_params(req, cfg, **kw).skip_special_tokens
    assert not build_params(req, cfg, **kw, keep_special_tokens=MISTRAL.keeps_special_tokens).skip_special_tokens
    assert build_params(req, cfg, **kw, keep_special_tokens=AUTO.keeps_special_tokens).skip_special_tokens


def test_offline_chat_sends_none_content_as_the_server_does(tiny_llama):
    """An assistant turn of tool calls only (content None) reaches the template as "" on both paths. transformers
    5.20 (what Python 3.10 installs) hands the template None, which renders as the text "None"; 5.25 turns it into
    "" itself, so there this test passes with or without the fix."""
    from transformers import AutoTokenizer

    from tachyon.engine.llm import chat_prompt_ids

    tok = AutoTokenizer.from_pretrained(tiny_llama)
    tok.chat_template = "{% for m in messages %}<{{ m.role }}>{% if m.content is none %}NONE{% endif %}{% endfor %}"
    messages = [dict(m) for m in HISTORY]
    assert tok.decode(chat_prompt_ids(tok, messages, add_generation_prompt=False)) == "<user><assistant><tool>"
    assert messages[1]["content"] is None  # the caller's messages are left as they were


def test_chat_template_kwargs_are_template_variables_only(tiny_llama):
    """chat_template_kwargs reach the template as variables; one naming an argument of apply_chat_template (the
    template itself, tokenize, sanitize_control_tokens, ...) is a 400 naming it, and the server's template is kept."""
    import asyncio
    import types

    from transformers import AutoTokenizer

    from tachyon.serving.errors import APIError
    from tachyon.serving.preprocess import chat_prompt
    from tachyon.serving.protocol import ChatMessage

    tok = AutoTokenizer.from_pretrained(tiny_llama)
    tok.chat_template = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}[{{ mood | default('-') }}]"
    model = types.SimpleNamespace(tokenizer=tok, max_model_len=4096, max_token_chars=64)
    msgs = [ChatMessage(role="user", content="hi")]
    ids = asyncio.run(chat_prompt(model, msgs, add_generation_prompt=False, template_kwargs={"mood": "calm"}))
    assert tok.decode(ids) == "<user>hi[calm]"
    for key, value in (("chat_template", "SWAPPED"), ("tokenize", True), ("conversation", []),
                       ("sanitize_control_tokens", False), ("tools", [])):
        with pytest.raises(APIError) as e:
            asyncio.run(chat_prompt(model, msgs, add_generation_prompt=False, template_kwargs={key: value}))
        assert e.value.status == 400 and e.value.param == "chat_template_kwargs" and key in e.value.message, key
    # template variables count toward the prompt's size check, before any rendering
    with pytest.raises(APIError) as e:
        asyncio.run(chat_prompt(model, msgs, add_generation_prompt=False, template_kwargs={"mood": "x" * 300_000}))
    assert e.value.status == 400 and e.value.code == "context_length_exceeded"
