"""POST /v1/completions: legacy completions (string / strings / token ids / lists of token ids),
with `echo` and prompt logprobs so perplexity tools (lm-eval local-completions) work.

`max_tokens=0` with `echo=true` scores the prompt only: one token is generated and dropped.
Choice index = prompt_index * n + sample_index, as OpenAI numbers them.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from tachyon.sampling import CompletionOutput, RequestOutput
from tachyon.serving.api import Call, SSEResponse, parse_body, serve_call, until_disconnect
from tachyon.serving.errors import APIError, bad_request
from tachyon.serving.formatting import DONE, completion_logprobs, merge_completion_logprobs, sse, usage
from tachyon.serving.generation import Generation
from tachyon.serving.params import build_params, check_logprobs, check_n, resolve_max_tokens
from tachyon.serving.preprocess import check_token_ids, context_error, decode, encode
from tachyon.serving.protocol import CompletionRequest
from tachyon.serving.registry import ServedModel

router = APIRouter()


@router.post("/v1/completions")
async def create_completion(request: Request) -> Response:
    return await serve_call(request, "completions", "cmpl", _handle)


class _Job:
    """What the response builders need besides the engine outputs."""

    def __init__(
        self,
        call: Call,
        gen: Generation,
        model: ServedModel,
        name: str,
        req: CompletionRequest,
        texts: list[str | None],
        drop_generated: bool,
    ) -> None:
        self.call, self.gen, self.model, self.name, self.req = call, gen, model, name, req
        self.texts = texts  # original prompt strings (None for token-id prompts)
        self.drop = drop_generated

    def prompt_text(self, i: int, out: RequestOutput) -> str:
        t = self.texts[i]
        return t if t is not None else decode(self.model, out.prompt_token_ids)

    def gen_ids(self, o: CompletionOutput) -> list[int]:
        return [] if self.drop else o.token_ids


async def _prompts(model: ServedModel, prompt: Any) -> tuple[list[list[int]], list[str | None]]:
    if isinstance(prompt, str):
        prompt = [prompt]
    if not prompt:
        raise bad_request("prompt must not be empty", "prompt")
    if isinstance(prompt[0], int):
        prompt = [prompt]
    ids, texts = [], []
    for i, p in enumerate(prompt):
        if isinstance(p, str):
            ids.append(await encode(model, p, add_special_tokens=True))
            texts.append(p)
        else:
            if len(p) >= model.max_model_len:  # before scanning a huge id list
                raise context_error(model, len(p))
            check_token_ids(model, p, f"prompt[{i}]")
            ids.append(list(p))
            texts.append(None)
        if not ids[-1]:
            raise bad_request(f"prompt[{i}] must not be empty", "prompt")
    return ids, texts


async def _handle(call: Call) -> Response:
    st, rec, cfg = call.state, call.record, call.state.config
    call.admit(1)  # bounded before the body is even read
    req = await parse_body(call.request, CompletionRequest, call.state.config.body_timeout)
    model = st.registry.get(req.model)
    name = req.model or model.name
    rec.model, rec.stream, rec.n = name, req.stream, req.n
    num = len(req.prompt) if isinstance(req.prompt, list) and req.prompt and not isinstance(req.prompt[0], int) else 1
    check_n(req.n, num, cfg)
    check_logprobs(req.logprobs, "logprobs", cfg)
    if req.suffix:
        raise bad_request("suffix is not supported", "suffix")
    if req.best_of is not None and req.best_of != req.n:
        raise bad_request("best_of must equal n (no server-side best-of selection)", "best_of")
    ids, texts = await _prompts(model, req.prompt)
    longest = max(len(p) for p in ids)
    drop = req.echo and req.max_tokens == 0
    max_tokens = 1 if drop else resolve_max_tokens(req.max_tokens, longest, model)
    if drop and longest + 1 > model.max_model_len:
        raise bad_request(f"prompt is longer than the model's context of {model.max_model_len} tokens", "prompt")
    prompt_lp = req.logprobs if (req.echo and req.logprobs is not None) else None
    params = build_params(req, cfg, max_tokens=max_tokens, logprobs=req.logprobs, vocab_size=model.vocab_size,
                          prompt_logprobs=prompt_lp)
    rec.prompt_tokens = sum(len(p) for p in ids)
    if cfg.log_content:
        rec.content = {"prompt": texts}
    st.limiter.check_tokens(call.key, rec.prompt_tokens)
    call.admit(req.n * len(ids))
    gen = Generation(model, ids, params, call.id, st.metrics, timeout=cfg.request_timeout, arrival=rec.start)
    call.cleanups.append(gen.close)
    job = _Job(call, gen, model, name, req, texts, drop)
    if req.stream:
        include_usage = bool(req.stream_options and req.stream_options.include_usage)
        return SSEResponse(_stream(job, include_usage), on_close=call.finish_stream)
    final: dict[int, RequestOutput] = await until_disconnect(call.request, gen.collect())
    return JSONResponse(_response(job, final))


def _note(job: _Job, outs: dict[int, RequestOutput]) -> None:
    rec = job.call.record
    rec.completion_tokens = sum(len(job.gen_ids(o)) for out in outs.values() for o in out.outputs)
    rec.finish_reason = ",".join(sorted({o.finish_reason or "none" for out in outs.values() for o in out.outputs}))
    rec.ttft, rec.queue_time = job.gen.ttft, job.gen.queue_time
    if rec.content is not None:
        rec.content["completion"] = [o.text for out in outs.values() for o in out.outputs]


def _prompt_logprobs(job: _Job, out: RequestOutput) -> dict[str, Any] | None:
    k = job.req.logprobs
    if k is None:
        return None
    entries = out.prompt_logprobs or [None] * len(out.prompt_token_ids)
    return completion_logprobs(job.model, out.prompt_token_ids, list(entries), k, 0)


def _choice(job: _Job, i: int, out: RequestOutput, o: CompletionOutput) -> dict[str, Any]:
    k = job.req.logprobs
    text = "" if job.drop else o.text
    prefix = job.prompt_text(i, out) if job.req.echo else ""
    lp = None
    if k is not None:
        lp = _prompt_logprobs(job, out) if job.req.echo else None
        gen_ids = job.gen_ids(o)
        if gen_ids and o.logprobs is not None:
            lp = merge_completion_logprobs(
                lp, completion_logprobs(job.model, gen_ids, list(o.logprobs), k, len(prefix))
            )
        elif lp is None:
            lp = merge_completion_logprobs(None, completion_logprobs(job.model, [], [], k, 0))
    return {
        "index": i * job.req.n + o.index,
        "text": prefix + text,
        "logprobs": lp,
        "finish_reason": "length" if job.drop else o.finish_reason,
    }


def _response(job: _Job, outs: dict[int, RequestOutput]) -> dict[str, Any]:
    _note(job, outs)
    choices = [
        _choice(job, i, outs[i], o) for i in sorted(outs) for o in sorted(outs[i].outputs, key=lambda o: o.index)
    ]
    prompt_tokens = sum(len(out.prompt_token_ids) for out in outs.values())
    return {
        "id": job.call.id,
        "object": "text_completion",
        "created": int(time.time()),
        "model": job.name,
        "choices": choices,
        "usage": usage(prompt_tokens, job.call.record.completion_tokens, _cached(job, outs.values())),
        "system_fingerprint": None,
    }


async def _stream(job: _Job, include_usage: bool) -> AsyncIterator[bytes]:
    base: dict[str, Any] = {
        "id": job.call.id,
        "object": "text_completion",
        "created": int(time.time()),
        "model": job.name,
        "system_fingerprint": None,
    }
    k, n = job.req.logprobs, job.req.n

    def chunk(choices: list[dict[str, Any]]) -> bytes:
        d = dict(base, choices=choices)
        if include_usage:
            d["usage"] = None
        return sse(d)

    sent_chars: dict[int, int] = {}
    sent_toks: dict[int, int] = {}
    offsets: dict[int, int] = {}
    outs: dict[int, RequestOutput] = {}
    try:
        async for i, out in job.gen.updates():
            outs[i] = out
            choices = []
            for o in out.outputs:
                idx = i * n + o.index
                text, lp = "", None
                if idx not in sent_chars:  # first chunk of this choice: the echoed prompt
                    sent_chars[idx], sent_toks[idx] = 0, 0
                    if job.req.echo:
                        text = job.prompt_text(i, out)
                        lp = _prompt_logprobs(job, out)
                    offsets[idx] = len(text)
                gen_ids = job.gen_ids(o)
                if not job.drop and len(o.text) > sent_chars[idx]:
                    text += o.text[sent_chars[idx] :]
                    sent_chars[idx] = len(o.text)
                new_ids = gen_ids[sent_toks[idx] :]
                if k is not None and new_ids and o.logprobs is not None:
                    part = completion_logprobs(job.model, new_ids, list(o.logprobs[sent_toks[idx] :]), k, offsets[idx])
                    offsets[idx] += sum(len(t) for t in part["tokens"])
                    lp = merge_completion_logprobs(lp, part)
                sent_toks[idx] = len(gen_ids)
                reason = ("length" if job.drop else o.finish_reason) if o.finish_reason else None
                if text or lp is not None or reason:
                    choices.append({"index": idx, "text": text, "logprobs": lp, "finish_reason": reason})
            for choice in choices:  # one choice per chunk, as OpenAI streams them
                yield chunk([choice])
        _note(job, outs)
        if include_usage:
            prompt_tokens = sum(len(out.prompt_token_ids) for out in outs.values())
            yield sse(dict(base, choices=[],
                           usage=usage(prompt_tokens, job.call.record.completion_tokens, _cached(job, outs.values()))))
    except APIError as e:
        job.call.fail(e)
        if outs:
            _note(job, outs)
        yield sse(e.body())
    yield DONE


def _cached(job: _Job, outs) -> int | None:
    """Prompt tokens served from the prefix cache, when the model caches prefixes (usage's cached_tokens)."""
    return sum(o.num_cached_tokens for o in outs) if job.model.prefix_caching else None
