"""Tool calling for chat completions. A tool_choice that forces a call (a named function, or "required")
constrains the output to the call's JSON (structured outputs); "auto" lets the model answer in text or call, and
a tool-call parser for the model's format (`--tool-call-parser`, serving/tool_parsers.py) finds the calls in its
text.

Contract: `tool_plan` validates `tools` / `tool_choice` / `parallel_tool_calls` (400 naming the field) and returns
None when no call can happen ("none", or no tools); "auto" without a parser is a 400. `split_output` turns a
finished output's text into (content, tool_calls), tool_calls None when the text holds no complete call (cut short
by max_tokens, or an "auto" answer in text); `streamable` says how much of an unfinished text may go out as
content (none under a forced call; under "auto" everything before a tool-call tag, or a prefix of one).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from tachyon.sampling import StructuredOutputsParams
from tachyon.serving.errors import bad_request
from tachyon.serving.tool_parsers import PARSERS

_ANY_ARGUMENTS = {"type": "object"}


@dataclass
class ToolPlan:
    """How calls come out: forced (`constraint` set; `name` for a named function, None for "required", a list of
    calls) or "auto" (`parser` set; the calls are found in the text)."""

    constraint: StructuredOutputsParams | None
    name: str | None
    finish_reason: str  # what a complete call reports: OpenAI says "stop" for a named function, else "tool_calls"
    parser: str | None = None
    names: frozenset[str] = frozenset()

    @property
    def keeps_special_tokens(self) -> bool:
        """Whether the text must keep special tokens for the parser to see the calls (Mistral's [TOOL_CALLS])."""
        return self.parser is not None and getattr(PARSERS[self.parser], "keeps_special_tokens", False)


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
            raise bad_request("tool_choice 'auto' needs the server started with --tool-call-parser (hermes for "
                              "Qwen2.5 / Qwen3 / Hermes, llama3_json for Llama 3.1+, mistral for Mistral / "
                              "Mixtral, pythonic for Llama 3.2 / 4); use 'required', a named function or 'none'",
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


def split_output(plan: ToolPlan, text: str) -> tuple[str | None, list[dict[str, Any]] | None]:
    """(content, tool_calls) of a finished output's text; tool_calls None (and the text as content) when it holds
    no complete call."""
    if plan.parser is not None:
        found = PARSERS[plan.parser].find(text, plan.names)
        if found is None:
            return text, None
        content, pairs = found
        return content, _calls(pairs)
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
    under "auto" what the parser says cannot start a call."""
    return 0 if plan.parser is None else PARSERS[plan.parser].streamable(text)
