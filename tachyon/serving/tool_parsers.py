"""Tool-call parsers for tool_choice "auto": each finds the calls a model family writes in its text.

Contract: `find(text, names)` returns (content, [(name, arguments)]) when the whole tool-call part of a finished text
is well formed and names only tools in `names`, else None (the caller keeps the text as content). `streamable(text)`
is how many leading characters of an unfinished text can no longer belong to a call, and so may be streamed.
"""

from __future__ import annotations

import ast
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


def _before_tag(text: str, tag: str) -> int:
    """streamable() of a format whose calls follow content after `tag`: everything before the tag, or before a
    tail that may still become it."""
    at = text.find(tag)
    return at if at >= 0 else len(text) - _held_tail(text, tag)


def _unless_opened(text: str, opener: str, tag: str) -> int:
    """streamable() of a format whose whole answer is the calls, starting with `opener` or `tag`: nothing while the
    answer may still become calls, all of it once it cannot."""
    head = text.lstrip()
    if not head or head.startswith(opener) or head.startswith(tag) or tag.startswith(head):
        return 0
    return len(text)


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
        return _before_tag(text, self.OPEN)


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
        return _unless_opened(text, "{", self.TAG)


class MistralParser:
    """`[TOOL_CALLS]` then the calls, after optional text: a JSON list of {"name": ..., "arguments": {...}} objects
    (Mistral's v3 tokenizer: Mistral-7B-Instruct-v0.3, Mixtral), or `name[ARGS]{...}` pieces, each after its own
    `[TOOL_CALLS]` (v11+: Mistral Small 3.2, Magistral). `[TOOL_CALLS]` and `[ARGS]` are special tokens, so the
    request keeps special tokens in its text (`keeps_special_tokens`)."""

    TAG = "[TOOL_CALLS]"
    ARGS = "[ARGS]"
    keeps_special_tokens = True

    def find(self, text: str, names: frozenset[str]) -> tuple[str | None, Pairs] | None:
        at = text.find(self.TAG)
        if at < 0:
            return None
        content, body = text[:at], text[at + len(self.TAG):].strip()
        pairs = self._json_list(body, names) if body.startswith("[") else self._pieces(body, names)
        if not pairs:
            return None
        return (content if content.strip() else None), pairs

    def _json_list(self, body: str, names: frozenset[str]) -> Pairs | None:
        try:
            value = json.loads(body)
        except json.JSONDecodeError:
            return None
        calls = [_call(obj, names) for obj in value] if isinstance(value, list) else [None]
        return None if None in calls else calls

    def _pieces(self, body: str, names: frozenset[str]) -> Pairs | None:
        decoder, pairs = json.JSONDecoder(), []
        for piece in body.split(self.TAG):
            name, sep, rest = piece.partition(self.ARGS)
            name, rest = name.strip(), rest.strip()
            if not sep or name not in names:
                return None
            try:
                args, end = decoder.raw_decode(rest)
            except json.JSONDecodeError:
                return None
            if not isinstance(args, dict) or rest[end:].strip():
                return None
            pairs.append((name, args))
        return pairs

    def streamable(self, text: str) -> int:
        return _before_tag(text, self.TAG)


class PythonicParser:
    """The whole answer is a Python list of calls with keyword arguments, `[get_weather(city="Paris"), f(x=1)]`,
    optionally between `<|python_start|>` and `<|python_end|>` (the "pythonic" format of Llama 3.2 and Llama 4
    templates). Arguments must be literals (strings, numbers, booleans, None, lists and dicts of them)."""

    START, END = "<|python_start|>", "<|python_end|>"

    def find(self, text: str, names: frozenset[str]) -> tuple[str | None, Pairs] | None:
        body = text.strip()
        if body.startswith(self.START):
            body = body[len(self.START):]
            body = body[:-len(self.END)] if body.endswith(self.END) else body
        body = body.strip()
        if not body.startswith("["):
            return None
        try:
            tree = ast.parse(body, mode="eval").body
        except (SyntaxError, ValueError, RecursionError):
            return None
        if not isinstance(tree, ast.List) or not tree.elts:
            return None
        pairs = []
        for call in tree.elts:
            if (not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name) or call.args
                    or call.func.id not in names or any(k.arg is None for k in call.keywords)):
                return None
            try:
                args = {k.arg: _literal(k.value) for k in call.keywords}
            except (ValueError, TypeError, SyntaxError, RecursionError):
                return None
            pairs.append((call.func.id, args))
        return None, pairs

    def streamable(self, text: str) -> int:
        return _unless_opened(text, "[", self.START)


def _literal(node: ast.AST) -> Any:
    """A keyword argument's value: a JSON-representable Python literal (true / false / null spelled as JSON are
    taken too, as models write them)."""
    if isinstance(node, ast.Name) and node.id in ("true", "false", "null"):
        return {"true": True, "false": False, "null": None}[node.id]
    if isinstance(node, ast.List):
        return [_literal(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise ValueError("** in a dict literal")
        return {str(_literal(k)): _literal(v) for k, v in zip(node.keys, node.values)}
    value = ast.literal_eval(node)
    if value is not None and not isinstance(value, (str, int, float, bool)):
        raise ValueError(f"not a JSON literal: {type(value).__name__}")
    return value


PARSERS = {"hermes": HermesParser(), "llama3_json": Llama3JsonParser(), "mistral": MistralParser(),
           "pythonic": PythonicParser()}
