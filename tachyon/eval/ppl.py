"""Perplexity with sliding windows, through Tachyon's prompt logprobs or plain `transformers`.

Windows of at most `window` tokens advance by `stride`; each token is scored once, in the first
window that contains it with its context (token 0 is never scored). Tachyon scores a window with
`SamplingParams(prompt_logprobs=0, max_tokens=1)`: `prompt_logprobs[j]` (None for j = 0) maps token
id -> Logprob and holds the actual prompt token. Both backends see the same token ids and windows,
so their perplexities are directly comparable. ppl = exp(total NLL / scored tokens).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class PplResult:
    ppl: float
    nll: float
    tokens: int
    windows: int
    window: int
    stride: int


def windows(n: int, window: int, stride: int) -> list[tuple[int, int, int]]:
    """(begin, end, score_from): score positions [score_from, end) with context [begin, position)."""
    if window < 2 or stride < 1 or stride > window:
        raise ValueError(f"need window >= 2 and 1 <= stride <= window, got {window}, {stride}")
    step = min(stride, window - 1)  # windows overlap by >= 1 token so each scored token has context
    out, prev_end = [], 0
    for begin in range(0, max(n - 1, 1), step):
        end = min(begin + window, n)
        out.append((begin, end, max(prev_end, begin + 1)))
        prev_end = end
        if end == n:
            break
    return out


def _result(nlls: list[float], w: int, s: int, n_windows: int) -> PplResult:
    total = sum(nlls)
    return PplResult(math.exp(total / len(nlls)), total, len(nlls), n_windows, w, s)


def tachyon_ppl(llm, ids: list[int], window: int, stride: int) -> PplResult:
    """Perplexity of `ids` under a loaded `tachyon.LLM` (windows limited to its max_model_len - 1)."""
    from tachyon import SamplingParams

    max_len = getattr(llm.engine, "max_model_len", None)
    if max_len is not None and window > max_len - 1:
        raise ValueError(f"window {window} exceeds max_model_len - 1 = {max_len - 1}")
    wins = windows(len(ids), window, stride)
    sp = SamplingParams(prompt_logprobs=0, max_tokens=1, temperature=0.0, detokenize=False)
    outs = llm.generate([ids[b:e] for b, e, _ in wins], sp, use_tqdm=False)
    nlls = []
    for (b, e, s), out in zip(wins, outs, strict=True):
        plp = out.prompt_logprobs
        if plp is None or len(plp) != e - b:
            raise RuntimeError(f"engine returned {0 if plp is None else len(plp)} prompt logprobs for "
                               f"a {e - b}-token window")
        for p in range(s, e):
            nlls.append(-plp[p - b][ids[p]].logprob)
    return _result(nlls, window, stride, len(wins))


def hf_ppl(model, ids: list[int], window: int, stride: int) -> PplResult:
    """Reference perplexity with a transformers causal LM (already on its device, eval mode)."""
    import torch

    wins = windows(len(ids), window, stride)
    dev = next(model.parameters()).device
    nlls: list[float] = []
    with torch.inference_mode():
        for b, e, s in wins:
            x = torch.tensor([ids[b:e]], device=dev)
            logp = torch.log_softmax(model(input_ids=x).logits[0].float(), dim=-1)
            tgt = torch.tensor(ids[s:e], device=dev)
            nlls.extend((-logp[s - b - 1:e - b - 1].gather(1, tgt[:, None])[:, 0]).tolist())
    return _result(nlls, window, stride, len(wins))


def tokenize(tokenizer, text: str, max_tokens: int | None = None) -> list[int]:
    ids = tokenizer(text, add_special_tokens=True)["input_ids"]
    return list(ids[:max_tokens] if max_tokens else ids)
