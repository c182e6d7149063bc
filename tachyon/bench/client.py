"""Async client for OpenAI-compatible `/v1/completions`: one request in, one timed `RequestRecord` out.

Contract: `await send(client, req, ...)` never raises for request failures: HTTP errors, broken
streams and timeouts land in `record.error`. Output lengths are forced (`max_tokens` plus
`ignore_eos`, and `min_tokens` = `max_tokens`). Streaming asks for `include_usage` and
`continuous_usage_stats`; per-chunk token counts come from the usage deltas when the server sends
them, else from `logprobs.tokens`, else one per content chunk; the final usage gives N, and when
assumed counts disagree with it they are re-spread (`spread_tokens`, record flagged
`chunk_tokens_inferred`). `exact_chunk_tokens=True` asks for `logprobs: 0` to get exact counts. With a
token-id prompt the server's `prompt_tokens` must equal the prompt length (else an error).
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

from tachyon.bench.datasets import ServeRequest
from tachyon.bench.schema import RequestRecord


def build_body(req: ServeRequest, model: str, stream: bool, extra: dict[str, Any] | None = None,
               continuous_usage: bool = True, exact_chunk_tokens: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "prompt": req.prompt, "max_tokens": req.max_tokens,
                            "min_tokens": req.max_tokens, "ignore_eos": True, "temperature": 0.0,
                            "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True, "continuous_usage_stats": continuous_usage}
        if exact_chunk_tokens:
            body["logprobs"] = 0
    body.update(extra or {})
    return body


def _chunk_tokens(event: dict, prev_completion: int | None) -> tuple[int, int | None, bool]:
    """Tokens carried by one SSE event, the running completion count from usage (if any), and whether
    the count is exact (usage delta or logprobs tokens) rather than assumed (one per content chunk)."""
    usage = event.get("usage") or None
    choices = event.get("choices") or []
    running = usage.get("completion_tokens") if usage else None
    if not choices:
        return 0, running if running is not None else prev_completion, True
    if running is not None:
        return max(0, running - (prev_completion or 0)), running, True
    ch = choices[0]
    lp = ch.get("logprobs") or {}
    if isinstance(lp, dict) and lp.get("tokens") is not None:
        return len(lp["tokens"]), prev_completion, True
    if ch.get("text") or ch.get("finish_reason") is None:
        return 1, prev_completion, False
    return 0, prev_completion, True


def spread_tokens(n_chunks: int, total: int) -> list[int]:
    """Per-chunk counts when only the total is known: the first chunk holds the first token alone
    (prefill emits one), the other tokens are spread evenly over the remaining chunks."""
    if n_chunks <= 0:
        return []
    if n_chunks == 1:
        return [total]
    q, r = divmod(max(total - 1, 0), n_chunks - 1)
    return [1] + [q + (1 if i < r else 0) for i in range(n_chunks - 1)]


async def send(client: httpx.AsyncClient, url: str, req: ServeRequest, model: str, rec: RequestRecord,
               clock, stream: bool = True, extra: dict[str, Any] | None = None,
               continuous_usage: bool = True, exact_chunk_tokens: bool = False) -> RequestRecord:
    """Issue `req`; fills `rec` (whose `sent` the caller set) using `clock()` for timestamps."""
    body = build_body(req, model, stream, extra, continuous_usage, exact_chunk_tokens)
    usage: dict | None = None
    assumed = False
    try:
        if stream:
            async with client.stream("POST", url, json=body) as resp:
                if resp.status_code != 200:
                    text = (await resp.aread()).decode(errors="replace")
                    rec.end, rec.error = clock(), f"HTTP {resp.status_code}: {text[:300]}"
                    return rec
                running: int | None = None
                async for line in resp.aiter_lines():
                    now = clock()
                    if rec.first_byte is None:
                        rec.first_byte = now
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    event = json.loads(data)
                    if "error" in event and not event.get("choices"):
                        raise RuntimeError(f"stream error: {str(event['error'])[:300]}")
                    k, running, exact = _chunk_tokens(event, running)
                    assumed |= k > 0 and not exact
                    usage = event.get("usage") or usage
                    if k > 0:
                        rec.chunk_times.append(now)
                        rec.chunk_tokens.append(k)
                rec.end = clock()
        else:
            resp = await client.post(url, json=body)
            rec.first_byte = rec.end = clock()
            if resp.status_code != 200:
                rec.error = f"HTTP {resp.status_code}: {resp.text[:300]}"
                return rec
            usage = resp.json().get("usage")
    except Exception as e:  # noqa: BLE001 - every failure is a data point
        rec.end = clock()
        rec.error = f"{type(e).__name__}: {e}"[:300] or type(e).__name__
        return rec
    if usage:
        rec.output_tokens = usage.get("completion_tokens", rec.output_tokens)
        if stream and assumed and rec.output_tokens is not None and rec.output_tokens != sum(rec.chunk_tokens):
            rec.chunk_tokens = spread_tokens(len(rec.chunk_tokens), rec.output_tokens)
            rec.chunk_tokens_inferred = True
        pt = usage.get("prompt_tokens")
        if isinstance(req.prompt, list) and pt is not None and pt != len(req.prompt):
            rec.error = f"server counted {pt} prompt tokens, sent {len(req.prompt)}"
        elif pt is not None:
            rec.prompt_tokens = pt
    return rec


def now_clock(t0: float | None = None):
    """A clock in seconds since `t0` (perf_counter based)."""
    base = time.perf_counter() if t0 is None else t0
    return lambda: time.perf_counter() - base
