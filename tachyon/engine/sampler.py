"""Logits -> next tokens, plus logprobs. Plain torch; the reference for the GPU sampling kernels.

Contract: the token chosen for a row depends only on that row's logits, its params, its token
history and (seed, step) — never on the rest of the batch — so seeded sampling is reproducible
whatever else runs. Logprobs are those of the raw model distribution (log-softmax of the logits
before penalties and temperature), as vLLM reports by default.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from tachyon.engine.request import Request

_MASK64 = (1 << 63) - 1


def step_seed(sample_seed: int, step: int) -> int:
    """Seed of the random draw for output position `step` (stateless: survives preemption)."""
    x = (sample_seed * 0x9E3779B97F4A7C15 + step * 0xBF58476D1CE4E5B9 + 0x94D049BB133111EB) & _MASK64
    x ^= x >> 31
    return x & _MASK64


@dataclass
class SampleResult:
    token_ids: list[int]
    # per row: (sampled token logprob, its rank, top-k ids, top-k logprobs) or None when not asked
    logprobs: list[tuple[float, int, list[int], list[float]] | None]


def apply_penalties(logits: torch.Tensor, req: Request) -> torch.Tensor:
    """Repetition (prompt + output, HF semantics) then presence/frequency (output only, OpenAI)."""
    p = req.params
    if p.repetition_penalty != 1.0:
        seen = torch.tensor(sorted(set(req.token_ids)), dtype=torch.long, device=logits.device)
        vals = logits[seen]
        logits[seen] = torch.where(vals > 0, vals / p.repetition_penalty, vals * p.repetition_penalty)
    if (p.presence_penalty or p.frequency_penalty) and req.num_output_tokens:
        out = torch.tensor(req.output_token_ids, dtype=torch.long, device=logits.device)
        counts = torch.zeros_like(logits).scatter_add_(0, out, torch.ones_like(out, dtype=logits.dtype))
        logits -= p.frequency_penalty * counts + p.presence_penalty * (counts > 0).to(logits.dtype)
    return logits


def filter_logits(logits: torch.Tensor, top_k: int, top_p: float, min_p: float) -> torch.Tensor:
    """Mask (to -inf) tokens below the min-p floor, outside the top-k, then outside the top-p nucleus of
    what remains (vLLM's order; each filter sees the renormalised survivors). logits: [V] fp32."""
    if min_p > 0.0:
        probs = logits.softmax(-1)
        logits = logits.masked_fill(probs < min_p * probs.max(), float("-inf"))
    if top_k and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, idx = torch.sort(logits, descending=True)
        probs = sorted_logits.softmax(-1)
        drop = (probs.cumsum(-1) - probs) >= top_p  # keep the shortest prefix whose mass reaches top_p
        logits = logits.clone()
        logits[idx[drop]] = float("-inf")
    return logits


def sample_row(logits: torch.Tensor, req: Request) -> int:
    """One token for one request from its (already penalised) fp32 logits row."""
    p = req.params
    if req.num_output_tokens < p.min_tokens:
        banned = [t for t in (*req.eos_token_ids, *p.stop_token_ids) if t < logits.shape[-1]]
        if banned:
            logits[banned] = float("-inf")
    if p.temperature == 0.0:
        return int(torch.argmax(logits))
    logits = filter_logits(logits / p.temperature, p.top_k, p.top_p, p.min_p)
    probs = logits.softmax(-1)
    gen = torch.Generator(device=logits.device)
    gen.manual_seed(step_seed(req.sample_seed, req.num_output_tokens))
    # exponential race: argmax(p / E) with E ~ Exp(1) draws exactly from p
    noise = torch.empty_like(probs).exponential_(generator=gen)
    return int(torch.argmax(probs / noise))


def compute_logprobs(raw_logits: torch.Tensor, token_ids: list[int], k: int):
    """log-softmax of raw logits: per row (token logprob, rank, top-k ids, top-k logprobs)."""
    lp = torch.log_softmax(raw_logits.float(), dim=-1)
    tok = torch.tensor(token_ids, device=lp.device)
    tok_lp = lp.gather(1, tok[:, None]).squeeze(1)
    ranks = (lp > tok_lp[:, None]).sum(-1) + 1
    if k > 0:
        top = torch.topk(lp, k, dim=-1)
        ids, vals = top.indices.tolist(), top.values.tolist()
    else:
        ids = vals = [[] for _ in token_ids]
    return [(float(tok_lp[i]), int(ranks[i]), ids[i], vals[i]) for i in range(len(token_ids))]


class Sampler:
    def __call__(self, logits: torch.Tensor, reqs: list[Request]) -> SampleResult:
        raw = logits
        logits = logits.float()
        if any(_needs_processing(r) for r in reqs):
            logits = logits.clone()
        tokens: list[int] = []
        all_greedy = all(_is_plain_greedy(r) for r in reqs)
        if all_greedy:
            tokens = torch.argmax(logits, dim=-1).tolist()
        else:
            for i, r in enumerate(reqs):
                row = apply_penalties(logits[i], r) if _has_penalty(r) else logits[i]
                tokens.append(sample_row(row, r))
        logprobs: list = [None] * len(reqs)
        want = [i for i, r in enumerate(reqs) if r.params.logprobs is not None]
        if want:
            k = max(reqs[i].params.logprobs for i in want)
            rows = compute_logprobs(raw[want], [tokens[i] for i in want], k)
            for i, row in zip(want, rows):
                kk = reqs[i].params.logprobs
                logprobs[i] = (row[0], row[1], row[2][:kk], row[3][:kk])
        return SampleResult(tokens, logprobs)


def _has_penalty(r: Request) -> bool:
    p = r.params
    return p.repetition_penalty != 1.0 or p.presence_penalty != 0.0 or p.frequency_penalty != 0.0


def _needs_processing(r: Request) -> bool:
    return _has_penalty(r) or r.params.min_tokens > 0 or r.params.temperature != 0.0


def _is_plain_greedy(r: Request) -> bool:
    return r.params.temperature == 0.0 and not _has_penalty(r) and r.num_output_tokens >= r.params.min_tokens
