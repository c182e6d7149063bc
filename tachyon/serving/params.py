"""OpenAI request fields -> `SamplingParams`, enforcing the server's caps with clear 400s.

Every refusal names the field and the limit. `SamplingParams` re-validates values (NaN, ranges)
and its `ValueError` becomes a 400 naming the same field.
"""

from __future__ import annotations

from tachyon.sampling import SamplingParams, StructuredOutputsParams
from tachyon.serving.config import ServerConfig
from tachyon.serving.errors import bad_request
from tachyon.serving.preprocess import context_error
from tachyon.serving.protocol import ChatCompletionRequest, CompletionRequest
from tachyon.serving.registry import ServedModel

_SEED_MIN, _SEED_MAX = -(2**63), 2**64 - 1


def _stop_list(stop: str | list[str] | None, cfg: ServerConfig) -> list[str]:
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    if len(stops) > cfg.max_stop:
        raise bad_request(f"stop: at most {cfg.max_stop} sequences are allowed, got {len(stops)}", "stop")
    for s in stops:
        if not s:
            raise bad_request("stop: sequences must be non-empty strings", "stop")
        if len(s) > cfg.max_stop_len:
            raise bad_request(f"stop: each sequence must be at most {cfg.max_stop_len} characters", "stop")
    return stops


def check_n(n: int, num_prompts: int, cfg: ServerConfig) -> None:
    if not 1 <= n <= cfg.max_n:
        raise bad_request(f"n must be between 1 and {cfg.max_n}, got {n}", "n")
    if num_prompts > cfg.max_prompts:
        raise bad_request(f"prompt: at most {cfg.max_prompts} prompts per request, got {num_prompts}", "prompt")


def resolve_max_tokens(requested: int | None, prompt_len: int, model: ServedModel, *, allow_zero: bool = False) -> int:
    """Completion budget: the request's, or all the context left; 400 when it cannot fit."""
    room = model.max_model_len - prompt_len
    if requested is None:
        if room < 1:
            raise context_error(model, prompt_len)
        return room
    if requested < (0 if allow_zero else 1):
        raise bad_request(f"max_tokens must be at least {0 if allow_zero else 1}, got {requested}", "max_tokens")
    if prompt_len + requested > model.max_model_len:
        raise context_error(model, prompt_len, requested)
    return requested


def check_logprobs(value: int | None, name: str, cfg: ServerConfig) -> None:
    if value is not None and not 0 <= value <= cfg.max_logprobs:
        raise bad_request(f"{name} must be between 0 and {cfg.max_logprobs}, got {value}", name)


_NO_TOOL_CHOICE = (None, "none", "auto")
_GUIDED = {"guided_json": "json", "guided_regex": "regex", "guided_choice": "choice", "guided_grammar": "grammar"}


def refuse_unimplemented(req: ChatCompletionRequest | CompletionRequest) -> None:
    """400 naming the field for the deprecated `functions` / `function_call`, which the server does not implement
    (use `tools`): plain text in their place would be a silent wrong answer. Their no-op forms pass: null, an empty
    list, "none" or "auto"."""
    if getattr(req, "functions", None):
        raise bad_request("functions is not supported; use tools", "functions")
    if getattr(req, "function_call", None) not in _NO_TOOL_CHOICE:
        raise bad_request("function_call must be 'none' or 'auto'; use tools and tool_choice", "function_call")


def structured_outputs(req: ChatCompletionRequest | CompletionRequest) -> StructuredOutputsParams | None:
    """The request's output constraint from OpenAI's response_format (json_object, json_schema), vLLM's
    structured_outputs object or its guided_json / guided_regex / guided_choice / guided_grammar; at most one of
    them. 400 naming the field for a malformed one; the engine compiles the grammar (its errors are 400s too)."""
    given: list[tuple[str, dict]] = []
    rf = req.response_format
    if rf is not None and rf.get("type", "text") != "text":
        kind = rf.get("type")
        if kind == "json_object":
            given.append(("response_format", {"json_object": True}))
        elif kind == "json_schema":
            schema = (rf.get("json_schema") or {}).get("schema") if isinstance(rf.get("json_schema"), dict) else None
            if not isinstance(schema, dict):
                raise bad_request("response_format: json_schema.schema must be a JSON schema object",
                                  "response_format")
            given.append(("response_format", {"json": schema}))
        else:
            raise bad_request(f"response_format type must be 'text', 'json_object' or 'json_schema', got "
                              f"{str(kind)[:40]!r}", "response_format")
    given += [(name, {key: getattr(req, name)}) for name, key in _GUIDED.items() if getattr(req, name) is not None]
    if req.structured_outputs is not None:
        if not isinstance(req.structured_outputs, dict):
            raise bad_request("structured_outputs must be an object", "structured_outputs")
        given.append(("structured_outputs", req.structured_outputs))
    if not given:
        return None
    if len(given) > 1:
        raise bad_request(f"at most one output constraint per request, got {', '.join(n for n, _ in given)}",
                          given[1][0])
    name, fields = given[0]
    unknown = set(fields) - {"json", "regex", "choice", "grammar", "json_object"}
    if unknown:
        raise bad_request(f"{name}: unknown field {sorted(unknown)[0][:40]!r}", name)
    try:
        return StructuredOutputsParams(**fields)
    except (TypeError, ValueError) as e:
        raise bad_request(f"{name}: {str(e)[:300]}", name) from None


def parse_logit_bias(raw: dict[str, float] | None, vocab_size: int) -> dict[int, float] | None:
    """OpenAI's logit_bias (token id strings -> bias) as SamplingParams takes it; 400 naming the field for a key that
    is not a token id of this model. Counts and values are SamplingParams' limits (MAX_LOGIT_BIAS, +-100)."""
    if not raw:
        return None
    bias = {}
    for key, value in raw.items():
        if not (key.isascii() and key.isdigit() and len(key) <= 10) or int(key) >= vocab_size:
            raise bad_request(f"logit_bias: key {key[:20]!r} is not a token id in [0, {vocab_size})", "logit_bias")
        bias[int(key)] = value
    return bias


def build_params(
    req: ChatCompletionRequest | CompletionRequest,
    cfg: ServerConfig,
    *,
    max_tokens: int,
    logprobs: int | None,
    vocab_size: int,
    prompt_logprobs: int | None = None,
    tool_constraint: StructuredOutputsParams | None = None,
    keep_special_tokens: bool = False,
) -> SamplingParams:
    """The engine's SamplingParams for a parsed request; 400 (naming the field) for a value out of its limits, a
    malformed output constraint, or functions / function_call (refuse_unimplemented). `tool_constraint`: the output
    constraint of a forced tool call (tools.tool_plan); `keep_special_tokens`: the text keeps special tokens whatever
    the request says (a tool-call parser that reads them, tools.ToolPlan.keeps_special_tokens)."""
    refuse_unimplemented(req)
    logit_bias = parse_logit_bias(req.logit_bias, vocab_size)
    constraint = structured_outputs(req)
    if tool_constraint is not None:
        if constraint is not None:
            raise bad_request("a tool_choice that forces a call cannot be combined with another output constraint",
                              "tool_choice")
        constraint = tool_constraint
    if req.seed is not None and not _SEED_MIN <= req.seed <= _SEED_MAX:
        raise bad_request("seed must fit in 64 bits", "seed")
    if req.stop_token_ids is not None and len(req.stop_token_ids) > 64:
        raise bad_request("stop_token_ids: at most 64 ids are allowed", "stop_token_ids")
    if req.min_tokens < 0 or req.min_tokens > max_tokens:
        raise bad_request(f"min_tokens must be between 0 and max_tokens ({max_tokens})", "min_tokens")
    try:
        return SamplingParams(
            n=req.n,
            temperature=1.0 if req.temperature is None else req.temperature,
            top_p=1.0 if req.top_p is None else req.top_p,
            top_k=0 if req.top_k is None else req.top_k,
            min_p=0.0 if req.min_p is None else req.min_p,
            presence_penalty=req.presence_penalty or 0.0,
            frequency_penalty=req.frequency_penalty or 0.0,
            repetition_penalty=1.0 if req.repetition_penalty is None else req.repetition_penalty,
            seed=req.seed,
            stop=_stop_list(req.stop, cfg),
            stop_token_ids=list(req.stop_token_ids or []),
            include_stop_str_in_output=req.include_stop_str_in_output,
            ignore_eos=req.ignore_eos,
            max_tokens=max_tokens,
            min_tokens=req.min_tokens,
            logprobs=logprobs,
            prompt_logprobs=prompt_logprobs,
            skip_special_tokens=req.skip_special_tokens and not keep_special_tokens,
            logit_bias=logit_bias,
            structured_outputs=constraint,
        )
    except ValueError as e:
        msg = str(e)
        raise bad_request(msg[:300], msg.split(" ", 1)[0]) from None
