"""Tool calling for chat completions. A tool_choice that forces a call (a named function, or "required")
constrains the output to the call's JSON (structured outputs); "auto" lets the model answer in text or call, and
a tool-call parser (`--tool-call-parser hermes`: the `<tool_call>{"name": ..., "arguments": ...}</tool_call>`
blocks of Qwen2.5 / Qwen3 / Hermes templates) finds the calls in its text.

Contract: `tool_plan` validates `tools` / `tool_choice` / `parallel_tool_calls` (400 naming the field) and returns
None when no call can happen ("none", or no tools); "auto" without a parser is a 400. `split_output` turns a
finished output's text into (content, tool_calls), tool_calls None when the text holds no complete call (cut short
by max_tokens, or an "auto" answer in text); `streamable` says how much of an unfinished text may go out as
content (none under a forced call; under "auto" everything before a tool-call tag, or a prefix of one).
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from typing import Any

from tachyon.sampling import StructuredOutputsParams
from tachyon.serving.errors import bad_request

_ANY_ARGUMENTS = {"type": "object"}


_HERMES_OPEN = "<tool_call>"
_HERMES_BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


@dataclass
class ToolPlan:
    """How calls come out: forced (`constraint` set; `name` for a named function, None for "required", a list of
    calls) or "auto" (`parser` set; the calls are found in the text)."""

    constraint: StructuredOutputsParams | None
    name: str | None
    finish_reason: str  # what a complete call reports: OpenAI says "stop" for a named function, else "tool_calls"
    parser: str | None = None
    names: frozenset[str] = frozenset()


def _functions(tools: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """name -> parameters schema; 400 naming `tools` for a malformed entry or a repeated name."""
    out: dict[str, dict[str, Any]] = {}
    for i, tool in enumerate(tools):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(fn, dict) or tool.get("type", "function") != "function":
            raise bad_request(f"tools[{i}] must be {{'type': 'function', 'function': {{...}}}}", "tools")
        name = fn.get("name")
        if not isinstance(name, str) or not name or len(name) > 64:
            raise bad_request(f"tools[{i}].function.name must be a string of 1 to 64 characters", "tools")
        if name in out:
            raise bad_request(f"tools[{i}]: the function name {name!r} is used twice", "tools")
        params = fn.get("parameters", _ANY_ARGUMENTS)
        if not isinstance(params, dict):
            raise bad_request(f"tools[{i}].function.parameters must be a JSON schema object", "tools")
        out[name] = params or _ANY_ARGUMENTS
    return out


def tool_plan(tools: list[dict[str, Any]] | None, tool_choice: str | dict[str, Any] | None,
              parallel_tool_calls: bool = True, parser: str | None = None) -> ToolPlan | None:
    """How `tool_choice` lets calls come out, or None (no tools, or tool_choice "none"); `parser`: the server's
    tool-call parser, which "auto" needs."""
    if not tools:
        if tool_choice not in (None, "none", "auto"):
            raise bad_request("tool_choice needs tools", "tool_choice")
        return None
    functions = _functions(tools)
    choice = tool_choice if tool_choice is not None else "auto"
    if choice == "none":
        return None
    if choice == "auto":
        if parser is None:
            raise bad_request("tool_choice 'auto' needs the server started with --tool-call-parser (hermes, for "
                              "Qwen2.5 / Qwen3 / Hermes templates); use 'required', a named function or 'none'",
                              "tool_choice")
        return ToolPlan(None, None, "tool_calls", parser=parser, names=frozenset(functions))
    if choice == "required":
        calls = {"anyOf": [{"type": "object", "properties": {"name": {"const": n}, "arguments": p},
                            "required": ["name", "arguments"], "additionalProperties": False}
                           for n, p in functions.items()]}
        schema = {"type": "array", "items": calls, "minItems": 1}
        if not parallel_tool_calls:
            schema["maxItems"] = 1
        return ToolPlan(StructuredOutputsParams(json=schema), None, "tool_calls")
    fn = choice.get("function") if isinstance(choice, dict) and choice.get("type") == "function" else None
    name = fn.get("name") if isinstance(fn, dict) else None
    if not isinstance(name, str):
        raise bad_request("tool_choice must be 'none', 'auto', 'required' or {'type': 'function', 'function': "
                          "{'name': ...}}", "tool_choice")
    if name not in functions:
        raise bad_request(f"tool_choice names {name[:64]!r}, which is not in tools", "tool_choice")
    return ToolPlan(StructuredOutputsParams(json=functions[name]), name, "stop")


def _calls(pairs: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    return [{"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
             "function": {"name": name, "arguments": json.dumps(args)}} for name, args in pairs]


def _hermes_calls(plan: ToolPlan, text: str) -> tuple[str | None, list[dict[str, Any]] | None]:
    blocks = list(_HERMES_BLOCK.finditer(text))
    if not blocks:
        return text, None
    pairs = []
    for b in blocks:
        try:
            call = json.loads(b.group(1))
        except json.JSONDecodeError:
            return text, None
        args = call.get("arguments", call.get("parameters")) if isinstance(call, dict) else None
        if not isinstance(args, dict) or call.get("name") not in plan.names:
            return text, None
        pairs.append((call["name"], args))
    content = text[:blocks[0].start()]
    return (content if content.strip() else None), _calls(pairs)


def split_output(plan: ToolPlan, text: str) -> tuple[str | None, list[dict[str, Any]] | None]:
    """(content, tool_calls) of a finished output's text; tool_calls None (and the text as content) when it holds
    no complete call."""
    if plan.parser == "hermes":
        return _hermes_calls(plan, text)
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return text, None
    if plan.name is not None:
        return None, _calls([(plan.name, value)])
    if isinstance(value, list) and value and all(isinstance(c, dict) and {"name", "arguments"} <= set(c)
                                                for c in value):
        return None, _calls([(c["name"], c["arguments"]) for c in value])
    return text, None


def streamable(plan: ToolPlan, text: str) -> int:
    """How many leading characters of an unfinished output may be streamed as content: none under a forced call;
    under "auto" those before the first tool-call tag, holding back a tail that may begin one."""
    if plan.parser is None:
        return 0
    at = text.find(_HERMES_OPEN)
    if at >= 0:
        return at
    for k in range(min(len(_HERMES_OPEN) - 1, len(text)), 0, -1):
        if _HERMES_OPEN.startswith(text[-k:]):
            return len(text) - k
    return len(text)
