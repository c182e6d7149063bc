"""Continuous batching under a per-step token budget.

Each step: running requests first (decodes and unfinished prefill chunks, oldest first), then
waiting requests in policy order while budget, `max_num_seqs` and the free-block watermark allow. A running
request whose last token by length is already in flight (overlap scheduling) is skipped: it ends when
that token arrives, so a further step would only compute a token to discard. When a
running request cannot get a block, the newest running request is preempted (recompute): its
blocks go back to the pool and it returns to the head of the waiting queue. No request is
admitted in a step that preempted, so a preempted request is not immediately displaced again. With prefix caching,
a waiting request whose next uncached prompt block a running request is computing waits (later requests may pass
it) until that block is cached, then shares it: a burst of requests with one system prompt computes it once.
With `long_prefill_token_threshold` T > 0, while a shorter prompt waits behind it (fewer prompt tokens left than it
has; and the running set has room), a prompt computes at most T tokens a step (running and newly admitted alike),
and the rest of the budget goes to the prompts behind it: one long prompt no longer holds up the first token of
every short one that arrives after it, and a prompt is not slowed for one at least as long as itself, which would
only trade one first token for another (shortest-remaining-first: LONG_PREFILL_SHORTER).

Policies:
  fcfs  admit in arrival order (first come, first served; the default).
  lpt   longest processing time first, opt-in, for offline batches: waiting requests are ordered by remaining output
        tokens (max_tokens less those sampled; preempted requests stay first, ties keep arrival order), and
        admission stops at ceil(remaining output tokens of running + waiting / horizon) running requests, the
        horizon being the steps the running requests need anyway (their longest remaining output). A decode step
        below the GEMMs' compute knee costs about one read of the weights however few rows it has, so the work is
        spread over the steps the longest request needs instead of being front-loaded into a batch that then
        drains into weight-bound steps. A waiting request at least as long as the horizon is due at once (it
        cannot end sooner), and with it, in the same step, those at least LPT_DUE_SOON of the horizon long; an
        idle engine always admits. With ignore_eos the remaining counts are exact; requests that stop early make
        the cap larger than needed, which tends to fcfs. Measured on an H200 (nano256): +1.2-2.2% on Qwen2.5-7B,
        -2 to -6% on Qwen3-0.6B, whose admissions' eager mixed steps are bound by the host
        (docs/performance-history.md, stop 27).
  flat  the offline LLM's default on a CUDA device (engine/llm.py): waiting requests in lpt's order, and each step
        filled to about R rows: every running decode, then prompt tokens up to R (the end of the prompt in
        progress, then the start of the next; at most FLAT_MAX_CHUNKS prompts in a step with decodes, as many as
        fit in one without). The horizon is the longest remaining output among running and waiting requests. With
        FLAT_DEADLINE (the default) R is the larger of FLAT_MIN_ROWS and the decodes plus the fewest prompt tokens
        that keep every prompt on its deadline: a request with o outputs left must start decoding within
        horizon - o steps, or it ends after the longest one (_flat_deadline_rate). Prompts then come in as late as
        the floor lets them, and the run ends with most requests still decoding instead of draining into steps of
        a few rows that each read every weight. Without it, R is the larger of FLAT_MIN_ROWS and ceil((remaining
        prompt + output tokens) / horizon): the prompts come in early and the batch drains at the end.
        `chunk_fit(decodes, tokens)` (the runner's mixed graphs' `tight_chunk`, when it has them) rounds a step's
        prompt tokens to a size its graph holds unpadded. With `FLAT_ROW_QUANTUM` q > 1 a step is filled to
        a multiple of q rows instead of to R itself, rounding up or down so the rows carried over the steps follow
        R (error diffusion: what a step takes beyond R is owed by the next ones, and the reverse); a step that
        lands past the multiple it aimed at (its decodes alone, or the chunk `chunk_fit` rounds to) is filled to
        the next multiple, since rows just past one cost nearly what the next costs.
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass, field
from itertools import islice

from tachyon.engine.kv_cache import KVCacheManager
from tachyon.engine.request import Request, RequestStatus

POLICIES = ("fcfs", "lpt", "flat")
# flat: the fewest rows a step is filled to (about the GEMMs' compute knee: fewer rows cost one weight read anyway),
# and the most prompts one step carries (the mixed graphs' chunk sequences). Under the deadline R 256 measured +1.5%
# over the previous fill (work over the horizon, at least 300 rows) on Qwen2.5-7B nano256, 128 +0.4% (H200, stop 45)
FLAT_MIN_ROWS = 256
FLAT_MAX_CHUNKS = 2
# flat: fill steps to multiples of this many rows. The GEMMs' cost rises in stairs between tile heights: on the H200
# a Qwen2.5-7B chain of 288 rows costs 16% more joules than one of 256, and one of 384 only as much as 352
# (docs/performance.md, "A row's GEMM cost around the flat fill"). 1 fills to R exactly.
FLAT_ROW_QUANTUM = 128
# flat: R from the waiting prompts' deadlines (each admitted late enough to end with the longest request, no later;
# _flat_deadline_rate) instead of from the remaining work spread evenly over the horizon
FLAT_DEADLINE = True
# lpt: once a request is due, the waiting requests whose remaining output is at least this share of the horizon
# join it in the same step (they would be due within the next ~10% of it), so admissions come as a few large
# prefill steps instead of one small eager step per request: on the H200's host an eager step of a few hundred
# tokens costs ~20-46 ms of kernel launches (Qwen2.5-7B) against ~7 ms for a graphed decode step
LPT_DUE_SOON = 0.9
# the long-prefill cap binds only while a shorter prompt waits (False: while any request waits, stop 60's rule). On
# Poisson arrivals of 205-3,891-token prompts the any-waiter rule moved TTFT from long prompts to short ones and
# left the mean level (H100, stop 61); replayed through this scheduler, the shorter-waiter rule keeps its gain for
# short prompts and most of the long ones' TTFT (benchmarks/long_prefill_sim.py), and through HTTP it beat the
# any-waiter rule's p90 TTFT in two runs (benchmarks/results/session50/). Neither rule beat no cap on that mix.
LONG_PREFILL_SHORTER = True


def lpt_due_soon() -> float:
    """LPT_DUE_SOON, or TACHYON_LPT_DUE_SOON (an A/B knob, read when a scheduler is made)."""
    value = float(os.environ.get("TACHYON_LPT_DUE_SOON", LPT_DUE_SOON))
    if not 0 < value <= 1:
        raise ValueError(f"TACHYON_LPT_DUE_SOON must be in (0, 1], got {value}")
    return value


def flat_min_rows() -> int:
    """FLAT_MIN_ROWS, or TACHYON_FLAT_ROWS (an A/B knob, read when a scheduler is made)."""
    value = int(os.environ.get("TACHYON_FLAT_ROWS", FLAT_MIN_ROWS))
    if value < 1:
        raise ValueError(f"TACHYON_FLAT_ROWS must be >= 1, got {value}")
    return value


def flat_deadline() -> bool:
    """FLAT_DEADLINE, or TACHYON_FLAT_DEADLINE=0/1 (an A/B knob, read when a scheduler is made)."""
    env = os.environ.get("TACHYON_FLAT_DEADLINE", "")
    if env not in ("", "0", "1"):
        raise ValueError(f"TACHYON_FLAT_DEADLINE must be 0 or 1, got {env!r}")
    return env == "1" if env else FLAT_DEADLINE


def flat_row_quantum() -> int:
    """FLAT_ROW_QUANTUM, or TACHYON_FLAT_QUANTUM (an A/B knob, read when a scheduler is made)."""
    value = int(os.environ.get("TACHYON_FLAT_QUANTUM", FLAT_ROW_QUANTUM))
    if value < 1:
        raise ValueError(f"TACHYON_FLAT_QUANTUM must be >= 1, got {value}")
    return value


def long_prefill_shorter() -> bool:
    """LONG_PREFILL_SHORTER, or TACHYON_LONG_PREFILL_RULE=shorter/any (an A/B knob, read when a scheduler is made)."""
    env = os.environ.get("TACHYON_LONG_PREFILL_RULE", "")
    if env not in ("", "shorter", "any"):
        raise ValueError(f"TACHYON_LONG_PREFILL_RULE must be 'shorter' or 'any', got {env!r}")
    return env == "shorter" if env else LONG_PREFILL_SHORTER


def remaining_output(req: Request) -> int:
    """Output tokens `req` may still sample (at least 1 while it is unfinished)."""
    return max(req.max_tokens - req.num_sampled, 1)


def _lpt_key(req: Request) -> tuple[bool, int]:
    return req.status != RequestStatus.PREEMPTED, -remaining_output(req)


@dataclass
class SchedulerOutput:
    requests: list[Request] = field(default_factory=list)
    num_new_tokens: list[int] = field(default_factory=list)
    preempted: list[Request] = field(default_factory=list)

    @property
    def total_tokens(self) -> int:
        return sum(self.num_new_tokens)

    def __bool__(self) -> bool:
        return bool(self.requests)


class Scheduler:
    def __init__(self, kv: KVCacheManager, *, max_num_seqs: int, max_num_batched_tokens: int,
                 enable_chunked_prefill: bool = True, watermark: float = 0.01, policy: str = "fcfs",
                 long_prefill_token_threshold: int = 0):
        if policy not in POLICIES:
            raise ValueError(f"scheduling_policy must be one of {POLICIES}, got {policy!r}")
        self.policy = policy
        self._ordered = policy in ("lpt", "flat")  # waiting requests longest remaining output first
        self._waiting_sorted = True
        self._waiting_output = 0  # lpt, flat: remaining_output summed over the waiting queue
        self._waiting_prompt = 0  # flat: prompt tokens still to compute, summed over the waiting queue
        self.due_soon = lpt_due_soon() if policy == "lpt" else LPT_DUE_SOON
        self.flat_rows = flat_min_rows() if policy == "flat" else FLAT_MIN_ROWS
        self.flat_quantum = flat_row_quantum() if policy == "flat" else FLAT_ROW_QUANTUM
        self.flat_deadline = flat_deadline() if policy == "flat" else FLAT_DEADLINE
        self._flat_owed = 0  # flat: rows the steps so far took short of their R (negative: beyond it)
        self.chunk_fit = None  # flat: (decode rows, prompt tokens) -> prompt tokens to schedule (module docstring)
        self.kv = kv
        self.max_num_seqs = min(max_num_seqs, max_num_batched_tokens)
        self.max_num_batched_tokens = max_num_batched_tokens
        self.enable_chunked_prefill = enable_chunked_prefill
        # while a shorter prompt waits, a prompt's chunk per step is at most this (0: off; needs chunked prefill)
        self.long_prefill_cap = long_prefill_token_threshold if enable_chunked_prefill else 0
        self.long_prefill_shorter = long_prefill_shorter()
        self.watermark_blocks = int(watermark * kv.pool.num_blocks)
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.num_preemptions = 0
        self.num_prefix_waits = 0  # admissions held back a step for a shared prefix in flight (prefix caching)

    def add(self, req: Request) -> None:
        self.waiting.append(req)
        if self._ordered:
            self._track_waiting(req, 1)
            self._waiting_sorted = False

    def _track_waiting(self, req: Request, sign: int) -> None:
        self._waiting_output += sign * remaining_output(req)
        self._waiting_prompt += sign * (req.num_tokens - req.num_computed_tokens)

    @property
    def num_unfinished(self) -> int:
        return len(self.waiting) + len(self.running)

    def schedule(self) -> SchedulerOutput:
        out = SchedulerOutput()
        budget, max_chunks = self.max_num_batched_tokens, None
        if self.policy == "flat":
            budget, decodes = self._flat_budget()
            # a mixed graph carries at most FLAT_MAX_CHUNKS prompts beside decodes; a step without decodes is a
            # prefill step, which takes as many prompts as fit (seed8's 8 prompts in one step, as under fcfs)
            max_chunks = FLAT_MAX_CHUNKS if decodes else None
        chunks = 0  # flat: prompts with tokens in this step
        i = 0
        while i < len(self.running) and budget > 0:
            req = self.running[i]
            if req.awaits_last_token:
                i += 1
                continue
            left = req.num_tokens - req.num_computed_tokens
            n = min(left, budget)
            if n > self.long_prefill_cap > 0 and self.waiting and len(self.running) < self.max_num_seqs:
                if self._shorter_waits(0, left):
                    n = self.long_prefill_cap
            while not self.kv.allocate_slots(req, n):
                victim = self.running.pop()
                self._preempt(victim)
                out.preempted.append(victim)
                if victim is req:
                    break
            else:
                out.requests.append(req)
                out.num_new_tokens.append(n)
                chunks += req.num_computed_tokens + n < req.num_tokens or n > 1
                budget -= n
                i += 1
        if out.preempted:
            return out
        cap, horizon = self._lpt_limits() if self.policy == "lpt" and self.waiting else (None, 0)
        due = False  # lpt: a due request was admitted this step; those due soon join it
        if self.policy == "flat" and self.waiting and not self._waiting_sorted:
            self._sort_waiting()
        inflight = None  # hashes of prompt blocks in flight (kv_cache.py), made when a request that shares asks
        j = 0  # the waiting request considered: those before it wait for a prefix in flight
        while j < len(self.waiting) and budget > 0 and len(self.running) < self.max_num_seqs:
            if max_chunks is not None and chunks >= max_chunks:
                break
            req = self.waiting[j]
            if cap is not None:
                rem = remaining_output(req)
                due = due or rem >= horizon
                if len(self.running) >= cap and rem < horizon and not (due and rem >= self.due_soon * horizon):
                    break  # lpt: later steps carry it without a longer run (module docstring)
            hits = self.kv.find_prefix(req)  # prefix caching: leading blocks another request computed
            if self.kv.shares(req):
                if inflight is None:
                    inflight = self._inflight_blocks()
                if inflight and self.kv.next_block_hash(req, hits) in inflight:
                    j += 1  # its next block is being computed by a running request: share it once it is cached
                    self.num_prefix_waits += 1
                    continue
            remaining = req.num_tokens - req.num_computed_tokens - len(hits) * self.kv.block_size
            n = min(remaining, budget)
            if n > self.long_prefill_cap > 0 and self._shorter_waits(j + 1, remaining):
                n = self.long_prefill_cap
            if n < remaining and not self.enable_chunked_prefill:
                break
            need, free = self.kv.admission_blocks(req, hits, n)
            if free - need < self.watermark_blocks and self.running:
                break  # keep headroom for running decodes; an idle engine always admits
            if need > free:
                break
            del self.waiting[j]
            if self._ordered:
                self._track_waiting(req, -1)
            self.kv.share_prefix(req, hits)
            if not self.kv.allocate_slots(req, n):
                raise RuntimeError(f"request {req.request_id}: {need} blocks were free at admission, then not")
            if inflight is not None:  # (None: no request that shares asked yet, and this one does not share)
                inflight.update(self.kv.inflight_blocks(req))
            req.status = RequestStatus.RUNNING
            self.running.append(req)
            out.requests.append(req)
            out.num_new_tokens.append(n)
            chunks += 1
            budget -= n
        return out

    def _shorter_waits(self, j: int, left: int) -> bool:
        """Whether a waiting request from index `j` on has fewer than `left` prompt tokens to compute (any waiting
        request under the any-waiter rule). Stops at the first such request; a step calls it at most budget / cap + 2
        times, as each call is for a prompt that then takes at least `long_prefill_cap` tokens of the step's budget."""
        if not self.long_prefill_shorter:
            return j < len(self.waiting)
        return any(r.num_tokens - r.num_computed_tokens < left for r in islice(self.waiting, j, None))

    def _inflight_blocks(self) -> set[int]:
        """Hashes of the prompt blocks running requests have still to compute (kv.inflight_blocks)."""
        inflight: set[int] = set()
        for r in self.running:
            if r.num_computed_tokens < len(r.prompt_token_ids):  # still in its prompt (most running rows decode)
                inflight.update(self.kv.inflight_blocks(r))
        return inflight

    def _sort_waiting(self) -> None:
        self.waiting = deque(sorted(self.waiting, key=_lpt_key))  # stable: ties keep arrival order
        self._waiting_sorted = True

    def _flat_budget(self) -> tuple[int, int]:
        """(this step's token budget under flat, its decode rows): every running decode, plus prompt tokens up to R
        rows (module docstring), as `chunk_fit` rounds them; no more than max_num_batched_tokens."""
        decodes, prompt, output, horizon = 0, self._waiting_prompt, self._waiting_output, 0
        for r in self.running:
            if r.awaits_last_token:
                continue
            left = r.num_tokens - r.num_computed_tokens
            if left <= 1:
                decodes += 1
            else:
                prompt += left
            rem = remaining_output(r)
            output += rem
            horizon = max(horizon, rem)
        if self.waiting:
            if not self._waiting_sorted:
                self._sort_waiting()
            horizon = max(horizon, remaining_output(self.waiting[0]))
        if not prompt:
            return self.max_num_batched_tokens, decodes
        if self.flat_deadline:
            rows = max(self.flat_rows, decodes + self._flat_deadline_rate(horizon, prompt))
        else:
            rows = max(self.flat_rows, -(-(prompt + output) // max(horizon, 1)))
        q, owed = self.flat_quantum, rows + self._flat_owed
        if q > 1:  # the multiple of q nearest what is owed, at least one q
            rows = max(q * ((owed + q // 2) // q), q)
        want = self._fit(decodes, min(rows, self.max_num_batched_tokens) - decodes)
        if q > 1:
            if (decodes + want) % q and decodes + want > rows:  # past the stair it aimed at: fill to the next
                want = self._fit(decodes, min(-(-(decodes + want) // q) * q, self.max_num_batched_tokens) - decodes)
            # what this step took short of R (or beyond it) carries to the next, by at most one q
            self._flat_owed = min(max(owed - decodes - want, -q), q)
        return min(decodes + want, self.max_num_batched_tokens), decodes

    def _flat_deadline_rate(self, horizon: int, prompt: int) -> int:
        """The fewest prompt tokens a step that keeps every prompt on time: a prompt (the running ones' rest
        first, then the waiting ones in lpt order) whose request has o outputs left must be done within
        horizon - o more steps, or its last token comes after the longest request's. The largest, over the
        queue, of the prompt tokens up to and including it over the steps it has. `prompt` is every prompt
        token still to compute (it ends the scan once no later prompt can ask for more); the scan also ends once
        the rate reaches the step budget, so a long queue costs a few requests' work a step, not the queue's."""
        rate, total, steps = 0, 0, 0
        for req in self._flat_prompt_queue():
            total += req.num_tokens - req.num_computed_tokens
            steps = horizon - remaining_output(req) + 1
            rate = max(rate, -(-total // max(steps, 1)))
            if prompt <= rate * steps or rate >= self.max_num_batched_tokens:
                break  # the rest cannot ask for more (their share has at least these steps), or more is not taken
        return rate

    def _flat_prompt_queue(self):
        """Requests with prompt tokens left, in the order flat computes them: running, then waiting."""
        for r in self.running:
            if not r.awaits_last_token and r.num_tokens - r.num_computed_tokens > 1:
                yield r
        yield from self.waiting

    def _fit(self, decodes: int, want: int) -> int:
        """Prompt tokens for a step with `decodes` decode rows that aims at `want` of them, as `chunk_fit` rounds
        them (at least 0)."""
        if want > 0 and self.chunk_fit is not None and decodes:
            want = self.chunk_fit(decodes, want)
        return max(want, 0)

    def _lpt_limits(self) -> tuple[int, int]:
        """(cap on running requests, horizon) for this step's admissions under lpt; orders the waiting queue."""
        if not self._waiting_sorted:
            self._sort_waiting()
        running = [remaining_output(r) for r in self.running]
        horizon = max(running) if running else remaining_output(self.waiting[0])
        return -(-(sum(running) + self._waiting_output) // horizon), horizon

    def _preempt(self, req: Request) -> None:
        self.kv.free(req)
        req.reset_for_recompute()
        self.waiting.appendleft(req)
        if self._ordered:
            self._track_waiting(req, 1)
        self.num_preemptions += 1

    def finish(self, req: Request, status: RequestStatus | None = None) -> None:
        """Remove a request (finished or aborted) and free its blocks. Idempotent."""
        if status is not None:
            req.status = status
        if req in self.running:
            self.running.remove(req)
        elif req in self.waiting:
            self.waiting.remove(req)
            if self._ordered:
                self._track_waiting(req, -1)
        self.kv.free(req)
