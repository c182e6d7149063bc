"""POST /v1/chat/completions: OpenAI chat completions, streaming (SSE) and not."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from tachyon.sampling import RequestOutput
from tachyon.serving.api import Call, SSEResponse, parse_body, serve_call, until_disconnect
from tachyon.serving.errors import APIError
from tachyon.serving.formatting import DONE, chat_logprobs, sse, usage
from tachyon.serving.generation import Generation
from tachyon.serving.params import build_params, check_logprobs, check_n, resolve_max_tokens
from tachyon.serving.preprocess import chat_prompt
from tachyon.serving.protocol import ChatCompletionRequest
from tachyon.serving.registry import ServedModel
from tachyon.serving.tools import ToolPlan, split_output, streamable, tool_plan

router = APIRouter()


@router.post("/v1/chat/completions")
async def create_chat_completion(request: Request) -> Response:
    return await serve_call(request, "chat", "chatcmpl", _handle)


async def _handle(call: Call) -> Response:
    st, rec = call.state, call.record
    call.admit(1)  # bounded before the body is even read
    req = await parse_body(call.request, ChatCompletionRequest, call.state.config.body_timeout)
    model = st.registry.get(req.model)
    name = req.model or model.name
    rec.model, rec.stream, rec.n = name, req.stream, req.n
    check_n(req.n, 1, st.config)
    if req.top_logprobs is not None:
        check_logprobs(req.top_logprobs, "top_logprobs", st.config)
        if not req.logprobs:
            raise APIError(400, "top_logprobs requires logprobs=true", param="top_logprobs")
    plan = tool_plan(req.tools, req.tool_choice, req.parallel_tool_calls, st.config.tool_call_parser)
    ids = await chat_prompt(
        model,
        req.messages,
        add_generation_prompt=req.add_generation_prompt,
        continue_final=req.continue_final_message,
        template_kwargs=req.chat_template_kwargs,
        tools=req.tools or None,
    )
    requested = req.max_completion_tokens if req.max_completion_tokens is not None else req.max_tokens
    max_tokens = resolve_max_tokens(requested, len(ids), model)
    top = (req.top_logprobs or 0) if req.logprobs else None
    params = build_params(req, st.config, max_tokens=max_tokens, logprobs=top, vocab_size=model.vocab_size,
                          tool_constraint=plan.constraint if plan else None,
                          keep_special_tokens=bool(plan and plan.keeps_special_tokens))
    rec.prompt_tokens = len(ids)
    if st.config.log_content:
        rec.content = {"prompt": [m.model_dump() for m in req.messages]}
    st.limiter.check_tokens(call.key, len(ids))
    call.admit(req.n)
    gen = Generation(model, [ids], params, call.id, st.metrics, timeout=st.config.request_timeout, arrival=rec.start)
    call.cleanups.append(gen.close)
    if req.stream:
        include_usage = bool(req.stream_options and req.stream_options.include_usage)
        return SSEResponse(_stream(call, gen, model, name, req, include_usage, plan), on_close=call.finish_stream)
    final: dict[int, RequestOutput] = await until_disconnect(call.request, gen.collect())
    return JSONResponse(_response(call, gen, model, name, final[0], top, plan))


def _message(plan: ToolPlan | None, text: str, finish_reason: str | None) -> tuple[dict[str, Any], str | None]:
    """The (message, finish_reason) of a finished output: its tool calls when the text holds complete ones (and
    whatever text came before them, under "auto"), else the text as content."""
    content, calls = split_output(plan, text) if plan is not None and finish_reason == "stop" else (text, None)
    if calls is None:
        return {"role": "assistant", "content": text}, finish_reason
    return {"role": "assistant", "content": content, "tool_calls": calls}, plan.finish_reason


def _note(call: Call, gen: Generation, out: RequestOutput) -> None:
    rec = call.record
    rec.completion_tokens = sum(len(o.token_ids) for o in out.outputs)
    rec.finish_reason = ",".join(sorted({o.finish_reason or "none" for o in out.outputs}))
    rec.ttft, rec.queue_time = gen.ttft, gen.queue_time
    if call.state.config.log_content and rec.content is not None:
        rec.content["completion"] = [o.text for o in out.outputs]


def _response(
    call: Call,
    gen: Generation,
    model: ServedModel,
    name: str,
    out: RequestOutput,
    top: int | None,
    plan: ToolPlan | None = None,
) -> dict[str, Any]:
    _note(call, gen, out)
    choices = []
    for o in sorted(out.outputs, key=lambda o: o.index):
        lp = None
        if top is not None and o.logprobs is not None:
            lp = chat_logprobs(model, o.token_ids, o.logprobs, top)
        message, finish_reason = _message(plan, o.text, o.finish_reason)
        choices.append({"index": o.index, "message": message, "logprobs": lp, "finish_reason": finish_reason})
    return {
        "id": call.id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": name,
        "choices": choices,
        "usage": usage(len(out.prompt_token_ids), call.record.completion_tokens, _cached(model, [out])),
        "system_fingerprint": None,
    }


async def _stream(
    call: Call,
    gen: Generation,
    model: ServedModel,
    name: str,
    req: ChatCompletionRequest,
    include_usage: bool,
    plan: ToolPlan | None = None,
) -> AsyncIterator[bytes]:
    """SSE chunks: a role chunk per choice, then text deltas; under a tool plan the text a call may claim is held
    back (all of it under a forced call), and the finished calls go out as one tool_calls delta with the
    finish_reason."""
    base: dict[str, Any] = {
        "id": call.id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": name,
        "system_fingerprint": None,
    }
    top = (req.top_logprobs or 0) if req.logprobs else None

    def chunk(choices: list[dict[str, Any]]) -> bytes:
        d = dict(base, choices=choices)
        if include_usage:
            d["usage"] = None
        return sse(d)

    sent_chars = [0] * req.n
    sent_toks = [0] * req.n
    last: RequestOutput | None = None
    try:
        for i in range(req.n):
            yield chunk(
                [
                    {
                        "index": i,
                        "delta": {"role": "assistant", "content": ""},
                        "logprobs": None,
                        "finish_reason": None,
                    }
                ]
            )
        async for _, out in gen.updates():
            last = out
            choices = []
            for o in out.outputs:
                k = o.index
                text = o.text[sent_chars[k] :] if len(o.text) > sent_chars[k] else ""
                new_ids = o.token_ids[sent_toks[k] :]
                if not text and not new_ids and o.finish_reason is None:
                    continue
                lp = None
                if top is not None and o.logprobs is not None and new_ids:
                    lp = chat_logprobs(model, new_ids, o.logprobs[sent_toks[k] :], top)
                sent_toks[k] = len(o.token_ids)
                finish_reason = o.finish_reason
                if plan is None:
                    delta = {"content": text} if text else {}
                    sent_chars[k] += len(text)
                elif o.finish_reason is None:  # content a tool call cannot still claim goes out now
                    text = o.text[sent_chars[k] : max(sent_chars[k], streamable(plan, o.text))]
                    if not text and lp is None:
                        continue
                    delta = {"content": text} if text else {}
                    sent_chars[k] += len(text)
                else:  # the rest of the content, then the calls, at the end
                    message, finish_reason = _message(plan, o.text, o.finish_reason)
                    rest = (message["content"] or "")[sent_chars[k] :]
                    delta = {"content": rest} if rest else {}
                    if "tool_calls" in message:
                        delta["tool_calls"] = [dict(c, index=j) for j, c in enumerate(message["tool_calls"])]
                    sent_chars[k] = len(o.text)
                choices.append({"index": k, "delta": delta, "logprobs": lp, "finish_reason": finish_reason})
            for choice in choices:  # one choice per chunk, as OpenAI streams them
                yield chunk([choice])
        if last is not None:
            _note(call, gen, last)
            if include_usage:
                yield sse(
                    dict(
                        base,
                        choices=[],
                        usage=usage(len(last.prompt_token_ids), call.record.completion_tokens, _cached(model, [last])),
                    )
                )
    except APIError as e:
        call.fail(e)
        if last is not None:
            _note(call, gen, last)
        yield sse(e.body())
    yield DONE


def _cached(model: ServedModel, outs: list[RequestOutput]) -> int | None:
    """Prompt tokens served from the prefix cache, when the model caches prefixes (usage's cached_tokens)."""
    return sum(o.num_cached_tokens for o in outs) if model.prefix_caching else None
