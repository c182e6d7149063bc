"""Tool calling for chat completions, on structured outputs: a tool_choice that forces a call (a named function, or
"required") constrains the output to the call's JSON, which becomes the message's `tool_calls`.

Contract: `tool_plan` validates `tools` / `tool_choice` / `parallel_tool_calls` (400 naming the field) and returns
None when no call is forced ("none", or no tools). "auto" is refused: choosing between text and a call needs a
per-model tool-call parser, which the server does not have. `tool_calls` turns a finished output's text into
OpenAI's `tool_calls` list, or None when the text is not a complete call (cut short by max_tokens or a stop string);
the caller then returns the text as content.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from tachyon.sampling import StructuredOutputsParams
from tachyon.serving.errors import bad_request

_ANY_ARGUMENTS = {"type": "object"}


@dataclass
class ToolPlan:
    """A forced tool call: `name` for a named function, None for "required" (a list of one or more calls)."""

    constraint: StructuredOutputsParams
    name: str | None
    finish_reason: str  # what a complete call reports: OpenAI says "stop" for a named function, else "tool_calls"


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
              parallel_tool_calls: bool = True) -> ToolPlan | None:
    """The forced call that `tool_choice` asks for, or None (no tools, or tool_choice "none")."""
    if not tools:
        if tool_choice not in (None, "none", "auto"):
            raise bad_request("tool_choice needs tools", "tool_choice")
        return None
    functions = _functions(tools)
    choice = tool_choice if tool_choice is not None else "auto"
    if choice == "none":
        return None
    if choice == "auto":
        raise bad_request("tool_choice 'auto' is not supported (it needs a tool-call parser for this model); use "
                          "'required', a named function or 'none'", "tool_choice")
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


def tool_calls(plan: ToolPlan, text: str) -> list[dict[str, Any]] | None:
    """OpenAI's tool_calls for a finished output's text, or None if the text is not a complete call."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    if plan.name is not None:
        calls = [(plan.name, value)]
    elif isinstance(value, list) and value and all(isinstance(c, dict) and {"name", "arguments"} <= set(c)
                                                  for c in value):
        calls = [(c["name"], c["arguments"]) for c in value]
    else:
        return None
    return [{"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
             "function": {"name": name, "arguments": json.dumps(args)}} for name, args in calls]
