"""Logits -> next tokens, plus logprobs.

Contract: the token chosen for a row depends only on that row's logits, its params, its token
history and (seed, step) — never on the rest of the batch — so seeded sampling is reproducible
whatever else runs. A row's logits get, in order: its logit_bias, its penalties, its min_tokens
bans, its structured-output mask (engine/structured.py), then temperature and the filters; a
structured row's matcher then consumes the token drawn. Logprobs are those of the raw model distribution
(log-softmax of the logits before all of these), as vLLM reports by default.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from tachyon import kernels
from tachyon.engine.penalty_counts import PenaltyCounts, Picked
from tachyon.engine.request import Request
from tachyon.engine.staging import aligned_rows, flat_row_indices, to_device_async
from tachyon.engine.structured import MaskPrefetch, apply_bitmask
from tachyon.sampling import Logprob, SamplingParams


@dataclass
class SampleResult:
    token_ids: list[int]
    # per row: (sampled token logprob, its rank, top-k ids, top-k logprobs) or None when not asked
    logprobs: list[tuple[float, int, list[int], list[float]] | None]


def apply_logit_biases(logits: torch.Tensor, rows: list[int], reqs: list[Request]) -> None:
    """In place: logits[rows[k]] += reqs[k]'s logit_bias (ids checked against the vocabulary on admission), every
    row in one index_add. `logits` is contiguous (batch, vocab)."""
    pairs = [r.logit_bias_tensors() for r in reqs]
    idx = flat_row_indices(rows, [ids for ids, _ in pairs], logits.shape[-1], logits.device)
    vals = to_device_async(torch.cat([v for _, v in pairs]).to(logits.dtype), logits.device)
    logits.view(-1).index_add_(0, idx, vals)


def ban_stop_tokens(logits: torch.Tensor, rows: list[int], reqs: list[Request]) -> None:
    """min_tokens, in place: EOS and stop tokens of reqs[k] cannot be drawn from logits[rows[k]]."""
    vocab = logits.shape[-1]
    flat = [row * vocab + t for row, r in zip(rows, reqs) for t in (*r.eos_token_ids, *r.params.stop_token_ids)
            if t < vocab]
    if flat:
        idx = to_device_async(torch.tensor(flat, dtype=torch.long), logits.device)
        logits.view(-1).index_fill_(0, idx, float("-inf"))  # a scalar argument: no copy, no sync


def sampling_rows(temperature: list[float], top_k: list[int], top_p: list[float], min_p: list[float],
                  seed: list[int], step: list[int], device: torch.device) -> tuple[torch.Tensor, ...]:
    """The per-row (temperature, top_k, top_p, min_p, seed, step) tensors kernels.sample takes, in two host-to-device
    copies, each starting 16-byte aligned whatever the batch size (staging.aligned_rows: packed rows compiled the six
    sampling kernels anew for each batch size mod 4 on a live request's first sampled eager draw, stop 66)."""
    temp, p, mp = aligned_rows([temperature, top_p, min_p], torch.float32, device)
    k, s, st = aligned_rows([top_k, seed, step], torch.int64, device)
    return temp, k.to(torch.int32), p, mp, s, st


def sampling_tensors(reqs: list[Request], device: torch.device, step_offset: int = 0) -> tuple[torch.Tensor, ...]:
    """`sampling_rows` of these requests; a row's step is its num_sampled + step_offset (-1 where the draw's own
    pending placeholder is already counted)."""
    ps = [r.params for r in reqs]
    return sampling_rows([p.temperature for p in ps], [p.top_k for p in ps], [p.top_p for p in ps],
                         [p.min_p for p in ps], [r.sample_seed for r in reqs],
                         [r.num_sampled + step_offset for r in reqs], device)


def logprobs_on_device(raw_logits: torch.Tensor, tokens: torch.Tensor, k: int) -> tuple[torch.Tensor, ...]:
    """log-softmax of raw logits [n, V] on their device, no sync: (each row's tokens[i] logprob [n], its rank
    from 1 [n], top-k ids [n, k], top-k logprobs [n, k]); k = 0 gives [n, 0] top tensors."""
    lp = torch.log_softmax(raw_logits.float(), dim=-1)
    tok_lp = lp.gather(1, tokens[:, None]).squeeze(1)
    ranks = (lp > tok_lp[:, None]).sum(-1) + 1
    if k > 0:
        top = torch.topk(lp, k, dim=-1)
        return tok_lp, ranks, top.indices, top.values
    empty = lp.new_empty(lp.shape[0], 0)
    return tok_lp, ranks, empty.long(), empty


def logprob_rows(tok_lp: torch.Tensor, ranks: torch.Tensor, ids: torch.Tensor, vals: torch.Tensor,
                 ks: list[int]) -> list[tuple[float, int, list[int], list[float]]]:
    """logprobs_on_device's tensors (on the host, or copied there: one copy per field) as per-row tuples, row i's
    top lists cut to ks[i] entries."""
    rows = zip(tok_lp.tolist(), ranks.tolist(), ids.tolist(), vals.tolist())
    return [(lp, rank, i[:k], v[:k]) for (lp, rank, i, v), k in zip(rows, ks)]


def compute_logprobs(raw_logits: torch.Tensor, token_ids: list[int], k: int):
    """log-softmax of raw logits: per row (token logprob, rank, top-k ids, top-k logprobs)."""
    tok = torch.tensor(token_ids, device=raw_logits.device)
    return logprob_rows(*logprobs_on_device(raw_logits, tok, k), [k] * len(token_ids))


def logprob_dict(token: int, row: tuple[float, int, list[int], list[float]]) -> dict[int, Logprob]:
    """One position's entry as vLLM returns it: the chosen token plus the top-k (ranks from 1)."""
    tok_lp, rank, top_ids, top_vals = row
    d = {token: Logprob(tok_lp, rank)}
    for r, (tid, v) in enumerate(zip(top_ids, top_vals)):
        d.setdefault(tid, Logprob(v, r + 1))
    return d


class Sampler:
    """Logit biases, penalties, min_tokens bans and structured-output masks are applied per row here; the draw
    itself is `kernels.sample` (Triton on GPU, its torch reference on CPU), so both paths share one definition of
    the filters. Structured rows' next masks are filled in the background between calls (`masks`); penalised
    rows' token counts stay on the device between calls (`penalties`)."""

    def __init__(self) -> None:
        self.masks = MaskPrefetch()
        self.penalties = PenaltyCounts()

    def __call__(self, logits: torch.Tensor, reqs: list[Request], drawn: torch.Tensor | None = None) -> SampleResult:
        """`drawn`: tokens already sampled from these logits by kernels.sample (inside a CUDA graph; else they are
        drawn here); kept but for the rows that need a logit bias, penalties, min_tokens bans or a
        structured-output mask, which change the distribution: only those rows are copied, changed and drawn
        again (`redraw`). Without `drawn`, each row is drawn once, through `redraw` when any row is special."""
        raw = logits
        special = [i for i, r in enumerate(reqs) if needs_host_logits(r)]
        if special and drawn is None:  # eager: every row drawn once, the special ones from their changed logits
            token_t = torch.empty(len(reqs), dtype=torch.long, device=logits.device)
            self.redraw(logits, list(range(len(reqs))), reqs, token_t, step_offset=0)
        elif special:  # a copy: `drawn` may be the graph's own output buffer
            token_t = drawn.clone()
            self.redraw(logits, special, [reqs[i] for i in special], token_t, step_offset=0)
        else:
            token_t = drawn if drawn is not None else draw_tokens(logits.float(), reqs)
        tokens = token_t.tolist()
        structured = [i for i in special if reqs[i].matcher is not None]
        if structured:
            feed_matchers([reqs[i] for i in structured], [tokens[i] for i in structured], self.masks, raw.shape[-1])
        logprobs: list = [None] * len(reqs)
        want = [i for i, r in enumerate(reqs) if r.params.logprobs is not None]
        if want:
            ks = [reqs[i].params.logprobs for i in want]
            tok = torch.tensor([tokens[i] for i in want], device=raw.device)
            for i, row in zip(want, logprob_rows(*logprobs_on_device(raw[want], tok, max(ks)), ks)):
                logprobs[i] = row
        return SampleResult(tokens, logprobs)

    def redraw(self, logits: torch.Tensor, rows: list[int], reqs: list[Request], out: torch.Tensor,
               step_offset: int = -1) -> None:
        """Rows that need host-side logits work, on the device with no host sync and no matcher fed: reqs[k] draws
        again from logits[rows[k]] changed as `_reshape` changes them, into out[rows[k]]. A launched step's rows
        (ModelRunner.finish_launch: step_offset -1, the draw's own pending placeholder is counted; the engine feeds
        each token when it reaches the host), or a synchronous graphed step's (`__call__`, step_offset 0)."""
        # a list index would copy it to the device blocking (a stream sync: the host would wait for the step)
        idx = to_device_async(torch.tensor(rows, dtype=torch.long), logits.device)
        sub = logits.index_select(0, idx).float()  # a copy: the step's own logits stay as they were
        counted = self._reshape(sub, list(range(len(rows))), reqs, step_offset)
        drawn = draw_tokens(sub, reqs, step_offset)
        out[idx] = drawn
        if counted is not None:
            self.penalties.record(counted, drawn)

    def _reshape(self, logits: torch.Tensor, rows: list[int], reqs: list[Request],
                 step_offset: int = 0) -> Picked | None:
        """In place, in the module docstring's order: reqs[k]'s bias, penalties, min_tokens bans and structured
        mask on logits[rows[k]] (contiguous float), each over all its rows at once. Returns the penalised rows,
        whose drawn tokens the caller passes to `penalties.record` (None: no such row). `step_offset` as
        sampling_tensors'."""
        biased = [k for k, r in enumerate(reqs) if r.params.logit_bias]
        if biased:
            apply_logit_biases(logits, [rows[k] for k in biased], [reqs[k] for k in biased])
        counted = None
        penalised = [k for k, r in enumerate(reqs) if _penalised(r.params)]
        if penalised:
            counted = self.penalties.apply(logits, [rows[k] for k in penalised], [reqs[k] for k in penalised],
                                           step_offset)
        banned = [k for k, r in enumerate(reqs) if r.num_output_tokens < r.params.min_tokens]
        if banned:
            ban_stop_tokens(logits, [rows[k] for k in banned], [reqs[k] for k in banned])
        structured = [k for k, r in enumerate(reqs) if r.matcher is not None]
        if structured:
            matchers = [reqs[k].matcher for k in structured]
            eos = [reqs[k].eos_token_ids for k in structured]
            apply_bitmask(logits, [rows[k] for k in structured], self.masks.take(matchers, eos, logits.shape[-1]))
        return counted


def feed_matchers(reqs: list[Request], tokens: list[int], masks: MaskPrefetch, vocab: int) -> None:
    """Each structured request's matcher consumes its token drawn (a failure leaves it erred: its next mask is EOS
    only); then `masks` starts filling their next masks (over `vocab` logits) in the background."""
    for r, t in zip(reqs, tokens):
        r.matcher.consume_token(t)
    masks.start([r.matcher for r in reqs], [r.eos_token_ids for r in reqs], vocab)


def draw_tokens(logits: torch.Tensor, reqs: list[Request], step_offset: int = 0,
                out: torch.Tensor | None = None) -> torch.Tensor:
    """One token per row of `logits` (float) by kernels.sample, argmax when every row is greedy; written into `out`
    (int64, one row per request) and returned when given. `step_offset` as sampling_tensors'."""
    if all(r.params.temperature == 0.0 for r in reqs):
        tokens = torch.argmax(logits, dim=-1)
        return tokens if out is None else out.copy_(tokens)
    return kernels.sample(logits, *sampling_tensors(reqs, logits.device, step_offset), out=out)


def reshapes_logits(p: SamplingParams) -> bool:
    """Whether these params change every draw's logits (logit bias, penalties, a structured-output mask), so a
    token drawn from the raw logits inside a CUDA graph cannot stand. min_tokens bans come and go by step: the
    caller checks them against its own count (drawn tokens, or those still pending too)."""
    return bool(p.logit_bias) or p.structured_outputs is not None or _penalised(p)


# which rows the overlap engine launches and redraws (redrawn_when_launched): "all" (the default: logit-biased,
# penalised and min_tokens rows as well as grammar rows) or "structured" (grammar rows only; the others run
# synchronously); read when this module is imported, or set here
LAUNCHED_REDRAWS = os.environ.get("TACHYON_LAUNCHED_REDRAWS", "all")
if LAUNCHED_REDRAWS not in ("structured", "all"):
    raise ValueError(f"TACHYON_LAUNCHED_REDRAWS={LAUNCHED_REDRAWS!r}: expected 'structured' or 'all'")


def redrawn_when_launched(r: Request) -> bool:
    """Whether the overlap engine launches a step holding this row, whose draw changes its logits first
    (needs_host_logits, counted with its pending tokens), and redraws the row on the device once the previous
    step's tokens are processed (ModelRunner.finish_launch). "all" (the default): every such row. "structured":
    structured-output rows without a logit bias, penalties or a min_tokens ban; the rest keep their step
    synchronous. On the H200 (7B, stop 52, benchmarks/results/session43/s51a/, two ABAB rounds) launching biased
    and penalised rows cut their TPOT at b64 from 5.35-5.84 to 4.89 ms (bias) and 5.47-5.84 to 4.93 (penalties),
    at b16 from 4.57-4.82 to 4.34-4.37, at b1 from 3.86-3.89 to 3.64-3.66, against 4.67 / 4.25 / 3.60 for plain
    rows; JSON rows were level. A launched step may run rows that have just finished (the engine learns it a step
    late), so the logits of the others can differ from the synchronous engine's in the last bits (another GEMM
    shape), and a sampled near-tie can then go the other way (stop 53: a 7.5e-7 gap on the tiny test model)."""
    if LAUNCHED_REDRAWS == "all":
        return True
    p = r.params
    return p.structured_outputs is not None and not p.logit_bias and not _penalised(p) and r.num_sampled >= p.min_tokens


def needs_host_logits(r: Request) -> bool:
    """Whether this row's next draw changes its logits first (reshapes_logits, or a min_tokens ban)."""
    return reshapes_logits(r.params) or r.num_output_tokens < r.params.min_tokens


def _penalised(p: SamplingParams) -> bool:
    return p.repetition_penalty != 1.0 or p.presence_penalty != 0.0 or p.frequency_penalty != 0.0
