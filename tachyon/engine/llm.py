"""LLM: the offline API, named as vLLM's (`LLM(model=...).generate(...)`, `.chat(...)`)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import replace

from tachyon.config import EngineConfig
from tachyon.engine.engine import LLMEngine, token_id_list
from tachyon.sampling import RequestOutput, SamplingParams

Prompt = str | list[int] | dict

# `LLM`'s per-step token budget when none is given. An offline job wants throughput: fewer, larger prefill steps
# (Qwen3-0.6B nano256 on an H200: 21,922 tok/s at 2,048, 26,389.5 at 8,192; benchmarks/results/session19/). The
# server keeps EngineConfig's 2,048, which bounds how long one prefill step holds up the running decodes. Stops 29-30
# used 16,384 on GPUs of at least 70 GiB (nano256 +0.7% on Qwen2.5-7B, +1.3% on Qwen3-0.6B) and it put Qwen3-0.6B
# bs1's decode ~2% slower (1,482 against 1,515 tok/s, TPOT 0.669 against 0.655 ms, whatever the KV cache's size:
# benchmarks/results/session24/); 8,192 is the default on every device again.
OFFLINE_MAX_NUM_BATCHED_TOKENS = 8192
# `LLM`'s admission order on a CUDA device when none is given: each prompt admitted as late as its deadline allows,
# steps filled to multiples of 128 rows (at least 256) with prompt chunks beside the decodes (engine/scheduler.py).
# H200, same board and commit (benchmarks/results/session32/): Qwen2.5-7B nano256 13,587.8 against fcfs' 12,941.2
# tok/s (+5.0%; earlier boards +2.3 to +3.5%), Qwen3-0.6B level (stop 38), with stop 39's fill; stop 44's 128-row
# fill +3.0% and +3.4% more (two A/Bs on two boards, session37/), stop 45's deadlines +1.4-1.5% more (session38/).
# bs1 and seed8 schedule as under fcfs (their prompts fit the first step). Prompts are admitted over the whole run,
# so TTFT rises (7B nano256 mean 3.41 s against fcfs' 1.71 at stop 39): the server keeps EngineConfig's fcfs.
# Elsewhere (the CPU, where no step is bound by the weight read) fcfs.
OFFLINE_GPU_SCHEDULING_POLICY = "flat"


def offline_policy(config: EngineConfig) -> str:
    """The admission order `LLM` uses when none is given: OFFLINE_GPU_SCHEDULING_POLICY on a CUDA device, else
    EngineConfig's default (fcfs)."""
    return OFFLINE_GPU_SCHEDULING_POLICY if config.resolved_device().type == "cuda" else config.scheduling_policy


class LLM:
    """Offline batched generation. `model=None` loads the default model (SmolLM2-135M-Instruct).

    Engine arguments are EngineConfig's, except that `max_num_batched_tokens` left out (or None) is
    OFFLINE_MAX_NUM_BATCHED_TOKENS, `scheduling_policy` left out (or None) is `offline_policy`'s, and
    `long_prefill_token_threshold` left out (or None) is 0: a batch's requests arrive together, so no prompt has
    short ones arriving behind it."""

    def __init__(self, model: str | None = None, **engine_args):
        budget = engine_args.pop("max_num_batched_tokens", None)
        if budget is None:
            budget = OFFLINE_MAX_NUM_BATCHED_TOKENS
        policy = engine_args.pop("scheduling_policy", None)
        if engine_args.get("long_prefill_token_threshold") is None:
            engine_args["long_prefill_token_threshold"] = 0
        config = EngineConfig.from_kwargs(model=model, **engine_args)
        if policy is None:
            policy = offline_policy(config)
        config = replace(config, max_num_batched_tokens=budget, scheduling_policy=policy)
        self.engine = LLMEngine(config)
        self._ids = itertools.count()

    def get_tokenizer(self):
        return self.engine.tokenizer

    def generate(self, prompts: Prompt | Sequence[Prompt],
                 sampling_params: SamplingParams | Sequence[SamplingParams] | None = None,
                 use_tqdm: bool = True) -> list[RequestOutput]:
        """Prompts: a string, token ids (a list or tuple of ints, or a 1-D integer numpy array / torch tensor),
        {"prompt_token_ids": ...} / {"prompt": "..."}, or a list of those (a 2-D array: one prompt a row).
        Returns one finished RequestOutput per prompt, in input order."""
        if isinstance(prompts, (str, dict)) or token_id_list(prompts) is not None and len(prompts) > 0:
            prompts = [prompts]  # one prompt (a 2-D array or tensor is a batch of rows: iterated below)
        prompts = [_unwrap(p) for p in prompts]
        if sampling_params is None or isinstance(sampling_params, SamplingParams):
            params = [sampling_params or SamplingParams()] * len(prompts)
        else:
            params = list(sampling_params)
            if len(params) != len(prompts):
                raise ValueError(f"sampling_params has {len(params)} entries for {len(prompts)} prompts")
        ids = []
        try:
            for p, sp in zip(prompts, params):
                rid = str(next(self._ids))
                self.engine.add_request(rid, p, sp)
                ids.append(rid)
        except Exception:
            for rid in ids:
                self.engine.abort(rid)
            raise
        return self._run(ids, use_tqdm)

    def _run(self, ids: list[str], use_tqdm: bool) -> list[RequestOutput]:
        done: dict[str, RequestOutput] = {}
        bar = None
        if use_tqdm and len(ids) > 1:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(ids), desc="Generating", unit="req", dynamic_ncols=True)
        try:
            while self.engine.has_unfinished():
                for out in self.engine.step(finished_only=True):
                    if out.finished:
                        done[out.request_id] = out
                        if bar is not None:
                            bar.update(1)
                            toks = self.engine.generation_tokens_total
                            bar.set_postfix_str(f"{toks / max(bar.format_dict['elapsed'], 1e-9):.1f} tok/s")
        except BaseException:
            for rid in ids:
                self.engine.abort(rid)
            raise
        finally:
            if bar is not None:
                bar.close()
        return [done[r] for r in ids]

    def reset_prefix_cache(self) -> int:
        """Forget the prompts earlier calls left in the prefix cache (their blocks become free): the next
        `generate` computes every prompt. Returns the KV blocks dropped."""
        return self.engine.reset_prefix_cache()

    def chat(self, messages: list[dict] | list[list[dict]],
             sampling_params: SamplingParams | Sequence[SamplingParams] | None = None,
             use_tqdm: bool = True, add_generation_prompt: bool = True,
             chat_template: str | None = None, tools: list[dict] | None = None) -> list[RequestOutput]:
        """One conversation (list of {"role", "content"}) or a list of them, rendered with the chat template;
        `tools` (OpenAI's function list) go to the template as HF's `tools` argument."""
        tok = self.engine.tokenizer
        if tok is None:
            raise ValueError("this model has no tokenizer, so it has no chat template")
        convs = [messages] if messages and isinstance(messages[0], dict) else messages
        prompts = []
        for conv in convs:
            prompts.append(chat_prompt_ids(tok, conv, add_generation_prompt, chat_template, tools))
        return self.generate(prompts, sampling_params, use_tqdm)


def chat_prompt_ids(tokenizer, messages: list[dict], add_generation_prompt: bool = True,
                    chat_template: str | None = None, tools: list[dict] | None = None) -> list[int]:
    """Render a conversation with the tokenizer's chat template and tokenise it (no extra special tokens:
    the template already holds them). A message whose content is None (an assistant turn of tool calls only)
    reaches the template with "" as the server sends it: some transformers versions render None as "None"."""
    if not messages:
        raise ValueError("messages must not be empty")
    messages = [dict(m, content="") if isinstance(m, dict) and m.get("content", "") is None else m for m in messages]
    extra = {"tools": tools} if tools else {}
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt,
                                         chat_template=chat_template, **extra)
    return tokenizer.encode(text, add_special_tokens=False)


def _unwrap(p: Prompt) -> str | list[int]:
    if isinstance(p, dict):
        if "prompt_token_ids" in p:
            return list(p["prompt_token_ids"])
        if "prompt" in p:
            return p["prompt"]
        raise ValueError("a prompt dict needs 'prompt' or 'prompt_token_ids'")
    return p
