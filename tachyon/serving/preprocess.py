"""Prompts -> token ids, off the event loop.

Chat templating and tokenisation run in a small thread pool (the Rust tokenizer's batch call
releases the GIL), so a multi-megabyte prompt never stalls /health. Before any of that, a prompt
whose character count alone proves it cannot fit the context is refused without tokenising it.
"""

from __future__ import annotations

import functools
import inspect
import json
from typing import Any

import anyio

from tachyon.serving.errors import APIError, bad_request
from tachyon.serving.protocol import ChatMessage
from tachyon.serving.registry import ServedModel

_limiter: anyio.CapacityLimiter | None = None


def _pool() -> anyio.CapacityLimiter:
    global _limiter
    if _limiter is None:
        _limiter = anyio.CapacityLimiter(4)
    return _limiter


def context_error(model: ServedModel, prompt_tokens: int | None, max_tokens: int | None = None) -> APIError:
    got = "more than that" if prompt_tokens is None else f"{prompt_tokens} prompt tokens"
    extra = f" plus max_tokens={max_tokens}" if max_tokens else ""
    return APIError(
        400,
        f"This model's maximum context length is {model.max_model_len} tokens; the request "
        f"has {got}{extra}. Shorten the prompt or lower max_tokens.",
        param="max_tokens" if max_tokens else "prompt",
        code="context_length_exceeded",
    )


def _check_chars(model: ServedModel, num_chars: int) -> None:
    # No token spans more than max_token_chars characters, so this many characters need more tokens.
    if num_chars > model.max_token_chars * model.max_model_len:
        raise context_error(model, None)


def _encode(model: ServedModel, text: str, add_special_tokens: bool) -> list[int]:
    backend = getattr(model.tokenizer, "_tokenizer", None)
    if backend is not None and hasattr(backend, "encode_batch"):
        return list(backend.encode_batch([text], add_special_tokens=add_special_tokens)[0].ids)
    return list(model.tokenizer.encode(text, add_special_tokens=add_special_tokens))


async def encode(model: ServedModel, text: str, add_special_tokens: bool = True) -> list[int]:
    _check_chars(model, len(text))
    if len(text) < 2048:
        return _encode(model, text, add_special_tokens)
    return await anyio.to_thread.run_sync(_encode, model, text, add_special_tokens, limiter=_pool())


def _message_dicts(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    out = []
    for i, m in enumerate(messages):
        content = m.content
        if isinstance(content, list):
            texts = []
            for part in content:
                if part.type != "text" or part.text is None:
                    raise bad_request(
                        f"messages[{i}].content: only text parts are supported",
                        param=f"messages[{i}].content",
                    )
                texts.append(part.text)
            content = "".join(texts)
        d: dict[str, Any] = {"role": "system" if m.role == "developer" else m.role, "content": content or ""}
        if m.name:
            d["name"] = m.name
        if m.tool_call_id:
            d["tool_call_id"] = m.tool_call_id
        if m.tool_calls:
            d["tool_calls"] = [_template_call(c) for c in m.tool_calls]
        out.append(d)
    return out


def _template_call(call: dict[str, Any]) -> dict[str, Any]:
    """A history tool call as chat templates read it: OpenAI sends arguments as a JSON string, templates (Qwen's,
    Llama 3's) expect the object, so a string that parses as one is replaced by it."""
    fn = call.get("function")
    if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
        try:
            args = json.loads(fn["arguments"])
        except json.JSONDecodeError:
            return call
        if isinstance(args, dict):
            return {**call, "function": {**fn, "arguments": args}}
    return call


def _render(
    model: ServedModel,
    messages: list[dict[str, Any]],
    add_generation_prompt: bool,
    continue_final: bool,
    kwargs: dict[str, Any],
) -> str:
    try:
        return model.tokenizer.apply_chat_template(
            messages,
            tokenize=False,
            add_generation_prompt=add_generation_prompt and not continue_final,
            continue_final_message=continue_final,
            **kwargs,
        )
    except ValueError as e:
        raise bad_request(f"chat template: {str(e)[:200]}", param="messages") from None
    except Exception as e:  # jinja TemplateError from `raise_exception` in the template
        raise bad_request(f"chat template error ({type(e).__name__})", param="messages") from None


# Never a client's to set, whatever the tokenizer's signature says: the template itself and the call's shape.
_TEMPLATING_ARGS = frozenset({"chat_template", "tokenize", "conversation", "tools"})


@functools.lru_cache(maxsize=8)
def _templating_args(tokenizer_type: type) -> frozenset[str]:
    """The named parameters of `tokenizer_type.apply_chat_template` (chat_template, tokenize, return_dict,
    sanitize_control_tokens, ...) bar `documents`: a client's chat_template_kwargs may carry template variables
    (enable_thinking, documents, ...) but none of these, which would let a request swap the server's template
    (a Jinja loop that renders for minutes) or change what the call returns."""
    try:
        params = inspect.signature(tokenizer_type.apply_chat_template).parameters.values()
    except (AttributeError, TypeError, ValueError):
        params = []
    named = {p.name for p in params if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)} - {"self", "documents"}
    return frozenset(named) | _TEMPLATING_ARGS


def _template_variables(model: ServedModel, template_kwargs: dict[str, Any] | None) -> dict[str, Any]:
    """A request's chat_template_kwargs, checked: one that names a templating argument is refused (400 naming
    it), so the server's chat template and call stay the server's."""
    kwargs = dict(template_kwargs or {})
    reserved = sorted(k for k in kwargs if k in _templating_args(type(model.tokenizer)))
    if reserved:
        raise bad_request(f"chat_template_kwargs.{reserved[0]} is not allowed: chat_template_kwargs carries template "
                          "variables only; the chat template and how it is applied are the server's",
                          param="chat_template_kwargs")
    return kwargs


async def chat_prompt(
    model: ServedModel,
    messages: list[ChatMessage],
    *,
    add_generation_prompt: bool = True,
    continue_final: bool = False,
    template_kwargs: dict[str, Any] | None = None,
    tools: list[dict[str, Any]] | None = None,
) -> list[int]:
    """Token ids of the chat-templated conversation (the template supplies special tokens); `tools` go to the
    template as HF's `tools` argument."""
    dicts = _message_dicts(messages)
    kwargs = _template_variables(model, template_kwargs)
    total = sum(len(d["content"]) for d in dicts) + (len(json.dumps(tools)) if tools else 0)
    total += len(json.dumps(kwargs, default=str)) if kwargs else 0  # template variables may reach the prompt too
    _check_chars(model, total)
    if tools:
        kwargs["tools"] = tools
    if total < 2048:
        text = _render(model, dicts, add_generation_prompt, continue_final, kwargs)
    else:
        text = await anyio.to_thread.run_sync(
            _render, model, dicts, add_generation_prompt, continue_final, kwargs, limiter=_pool()
        )
    return await encode(model, text, add_special_tokens=False)


def check_token_ids(model: ServedModel, ids: list[int], param: str) -> None:
    if not ids:
        raise bad_request(f"{param} must not be empty", param=param)
    if max(ids) < model.vocab_size:  # the common case in one C-level pass
        return
    bad = next(t for t in ids if t >= model.vocab_size)
    raise bad_request(f"{param}: token id {bad} is out of range [0, {model.vocab_size})", param=param)


def decode(model: ServedModel, ids: list[int], skip_special_tokens: bool = False) -> str:
    return model.tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)


async def decode_ids(model: ServedModel, ids: list[int], param: str) -> str:
    """`ids` checked (check_token_ids, when any) and decoded; long lists in the thread pool, as encode does, so a
    multi-megabyte /detokenize body never stalls /health."""
    def work() -> str:
        if ids:
            check_token_ids(model, ids, param)
        return decode(model, ids)

    if len(ids) < 2048:
        return work()
    return await anyio.to_thread.run_sync(work, limiter=_pool())
