"""OpenAI wire objects (plain dicts) built from engine outputs: logprobs, usage, chunks, SSE framing."""

from __future__ import annotations

import json
from typing import Any

from tachyon.sampling import Logprob
from tachyon.serving.registry import ServedModel

DONE = b"data: [DONE]\n\n"


def sse(obj: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"


def usage(prompt_tokens: int, completion_tokens: int, cached_tokens: int | None = None) -> dict[str, Any]:
    """OpenAI's usage object; `cached_tokens` (prompt tokens served from the prefix cache) adds
    prompt_tokens_details, as OpenAI reports its own prompt caching."""
    out: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if cached_tokens is not None:
        out["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    return out


def _finite(x: float) -> float:
    # JSON has no -inf; OpenAI reports -9999.0 for impossible tokens.
    return x if x > -9999.0 else -9999.0


def _ranked(entry: dict[int, Logprob], k: int) -> list[tuple[int, Logprob]]:
    items = sorted(entry.items(), key=lambda kv: (kv[1].rank if kv[1].rank is not None else 1 << 30, -kv[1].logprob))
    return items[:k]


def _text(model: ServedModel, tid: int, lp: Logprob | None) -> str:
    if lp is not None and lp.decoded_token is not None:
        return lp.decoded_token
    return model.piece(tid)


def chat_logprobs(
    model: ServedModel, token_ids: list[int], entries: list[dict[int, Logprob]], top: int
) -> dict[str, Any]:
    """`{"content": [...]}` for the given generated tokens (one entry per token)."""
    content = []
    for tid, entry in zip(token_ids, entries, strict=False):
        lp = entry.get(tid)
        tok = _text(model, tid, lp)
        content.append(
            {
                "token": tok,
                "logprob": _finite(lp.logprob if lp else -9999.0),
                "bytes": list(tok.encode("utf-8")),
                "top_logprobs": [
                    {
                        "token": (t := _text(model, i, e)),
                        "logprob": _finite(e.logprob),
                        "bytes": list(t.encode()),
                    }
                    for i, e in _ranked(entry, top)
                ],
            }
        )
    return {"content": content}


def completion_logprobs(
    model: ServedModel, token_ids: list[int], entries: list[dict[int, Logprob] | None], top: int, offset: int
) -> dict[str, Any]:
    """Legacy completions logprobs: tokens, token_logprobs, top_logprobs, text_offset (from `offset`)."""
    tokens, token_lps, tops, offsets = [], [], [], []
    pos = offset
    for tid, entry in zip(token_ids, entries, strict=False):
        lp = entry.get(tid) if entry else None
        tok = _text(model, tid, lp)
        tokens.append(tok)
        offsets.append(pos)
        pos += len(tok)
        if entry is None:
            token_lps.append(None)
            tops.append(None)
            continue
        token_lps.append(_finite(lp.logprob) if lp else None)
        best = {_text(model, i, e): _finite(e.logprob) for i, e in _ranked(entry, top)}
        if lp is not None:
            best.setdefault(tok, _finite(lp.logprob))
        tops.append(best)
    return {"tokens": tokens, "token_logprobs": token_lps, "top_logprobs": tops, "text_offset": offsets}


def merge_completion_logprobs(a: dict[str, Any] | None, b: dict[str, Any]) -> dict[str, Any]:
    if a is None:
        return b
    return {k: a[k] + b[k] for k in ("tokens", "token_logprobs", "top_logprobs", "text_offset")}
