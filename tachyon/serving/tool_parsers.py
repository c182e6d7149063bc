"""Tool-call parsers for tool_choice "auto": each finds the calls a model family writes in its text.

Contract: `find(text, names)` returns (content, [(name, arguments)]) when the whole tool-call part of a finished text
is well formed and names only tools in `names`, else None (the caller keeps the text as content). `streamable(text)`
is how many leading characters of an unfinished text can no longer belong to a call, and so may be streamed.
"""

from __future__ import annotations

import json
import re
from typing import Any

Pairs = list[tuple[str, dict[str, Any]]]


def _call(obj: Any, names: frozenset[str]) -> tuple[str, dict[str, Any]] | None:
    """(name, arguments) of one {"name": ..., "arguments" | "parameters": {...}} object naming a known tool."""
    if not isinstance(obj, dict):
        return None
    args = obj.get("arguments", obj.get("parameters"))
    if obj.get("name") not in names or not isinstance(args, dict):
        return None
    return obj["name"], args


def _held_tail(text: str, tag: str) -> int:
    """Length of the longest tail of `text` that is a proper prefix of `tag`."""
    for k in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-k:]):
            return k
    return 0


class HermesParser:
    """`<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks after optional text (the format Qwen2.5,
    Qwen3 and Hermes chat templates ask for)."""

    OPEN = "<tool_call>"
    BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)

    def find(self, text: str, names: frozenset[str]) -> tuple[str | None, Pairs] | None:
        blocks = list(self.BLOCK.finditer(text))
        if not blocks or text[blocks[-1].end():].strip():
            return None
        pairs = []
        for b in blocks:
            try:
                call = _call(json.loads(b.group(1)), names)
            except json.JSONDecodeError:
                return None
            if call is None:
                return None
            pairs.append(call)
        content = text[:blocks[0].start()]
        return (content if content.strip() else None), pairs

    def streamable(self, text: str) -> int:
        at = text.find(self.OPEN)
        return at if at >= 0 else len(text) - _held_tail(text, self.OPEN)


class Llama3JsonParser:
    """The whole answer is the call: one JSON object {"name": ..., "parameters": {...}}, or several separated by
    ";", optionally after `<|python_tag|>` (Llama 3.1+ templates' custom tool format)."""

    TAG = "<|python_tag|>"

    def find(self, text: str, names: frozenset[str]) -> tuple[str | None, Pairs] | None:
        body = text.strip()
        body = body[len(self.TAG):] if body.startswith(self.TAG) else body
        decoder, pairs, at = json.JSONDecoder(), [], 0
        while True:
            while at < len(body) and (body[at].isspace() or (pairs and body[at] == ";")):
                at += 1
            if at == len(body):
                return (None, pairs) if pairs else None
            try:
                obj, at = decoder.raw_decode(body, at)
            except json.JSONDecodeError:
                return None
            call = _call(obj, names)
            if call is None:
                return None
            pairs.append(call)

    def streamable(self, text: str) -> int:
        head = text.lstrip()
        if not head or head.startswith("{") or head.startswith(self.TAG) or self.TAG.startswith(head):
            return 0
        return len(text)


PARSERS = {"hermes": HermesParser(), "llama3_json": Llama3JsonParser()}
