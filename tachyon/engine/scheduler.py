"""Continuous batching under a per-step token budget.

Each step: running requests first (decodes and unfinished prefill chunks, oldest first), then
waiting requests in policy order while budget, `max_num_seqs` and the free-block watermark allow. A running
request whose last token by length is already in flight (overlap scheduling) is skipped: it ends when
that token arrives, so a further step would only compute a token to discard. When a
running request cannot get a block, the newest running request is preempted (recompute): its
blocks go back to the pool and it returns to the head of the waiting queue. No request is
admitted in a step that preempted, so a preempted request is not immediately displaced again.

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
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass, field

from tachyon.engine.kv_cache import KVCacheManager
from tachyon.engine.request import Request, RequestStatus

POLICIES = ("fcfs", "lpt")
# lpt: once a request is due, the waiting requests whose remaining output is at least this share of the horizon
# join it in the same step (they would be due within the next ~10% of it), so admissions come as a few large
# prefill steps instead of one small eager step per request: on the H200's host an eager step of a few hundred
# tokens costs ~20-46 ms of kernel launches (Qwen2.5-7B) against ~7 ms for a graphed decode step
LPT_DUE_SOON = 0.9


def lpt_due_soon() -> float:
    """LPT_DUE_SOON, or TACHYON_LPT_DUE_SOON (an A/B knob, read when a scheduler is made)."""
    value = float(os.environ.get("TACHYON_LPT_DUE_SOON", LPT_DUE_SOON))
    if not 0 < value <= 1:
        raise ValueError(f"TACHYON_LPT_DUE_SOON must be in (0, 1], got {value}")
    return value


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
                 enable_chunked_prefill: bool = True, watermark: float = 0.01, policy: str = "fcfs"):
        if policy not in POLICIES:
            raise ValueError(f"scheduling_policy must be one of {POLICIES}, got {policy!r}")
        self.policy = policy
        self._waiting_sorted = True
        self._waiting_output = 0  # lpt: remaining_output summed over the waiting queue
        self.due_soon = lpt_due_soon() if policy == "lpt" else LPT_DUE_SOON
        self.kv = kv
        self.max_num_seqs = min(max_num_seqs, max_num_batched_tokens)
        self.max_num_batched_tokens = max_num_batched_tokens
        self.enable_chunked_prefill = enable_chunked_prefill
        self.watermark_blocks = int(watermark * kv.pool.num_blocks)
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.num_preemptions = 0

    def add(self, req: Request) -> None:
        self.waiting.append(req)
        if self.policy == "lpt":
            self._waiting_output += remaining_output(req)
            self._waiting_sorted = False

    @property
    def num_unfinished(self) -> int:
        return len(self.waiting) + len(self.running)

    def schedule(self) -> SchedulerOutput:
        out = SchedulerOutput()
        budget = self.max_num_batched_tokens
        i = 0
        while i < len(self.running) and budget > 0:
            req = self.running[i]
            if req.awaits_last_token:
                i += 1
                continue
            n = min(req.num_tokens - req.num_computed_tokens, budget)
            while not self.kv.allocate_slots(req, n):
                victim = self.running.pop()
                self._preempt(victim)
                out.preempted.append(victim)
                if victim is req:
                    break
            else:
                out.requests.append(req)
                out.num_new_tokens.append(n)
                budget -= n
                i += 1
        if out.preempted:
            return out
        cap, horizon = self._lpt_limits() if self.policy == "lpt" and self.waiting else (None, 0)
        due = False  # lpt: a due request was admitted this step; those due soon join it
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            req = self.waiting[0]
            if cap is not None:
                rem = remaining_output(req)
                due = due or rem >= horizon
                if len(self.running) >= cap and rem < horizon and not (due and rem >= self.due_soon * horizon):
                    break  # lpt: later steps carry it without a longer run (module docstring)
            remaining = req.num_tokens - req.num_computed_tokens
            n = min(remaining, budget)
            if n < remaining and not self.enable_chunked_prefill:
                break
            need = self.kv.blocks_needed(req, n)
            if self.kv.pool.num_free - need < self.watermark_blocks and self.running:
                break  # keep headroom for running decodes; an idle engine always admits
            if not self.kv.allocate_slots(req, n):
                break
            self.waiting.popleft()
            if self.policy == "lpt":
                self._waiting_output -= remaining_output(req)
            req.status = RequestStatus.RUNNING
            self.running.append(req)
            out.requests.append(req)
            out.num_new_tokens.append(n)
            budget -= n
        return out

    def _lpt_limits(self) -> tuple[int, int]:
        """(cap on running requests, horizon) for this step's admissions under lpt; orders the waiting queue."""
        if not self._waiting_sorted:
            self.waiting = deque(sorted(self.waiting, key=_lpt_key))  # stable: ties keep arrival order
            self._waiting_sorted = True
        running = [remaining_output(r) for r in self.running]
        horizon = max(running) if running else remaining_output(self.waiting[0])
        return -(-(sum(running) + self._waiting_output) // horizon), horizon

    def _preempt(self, req: Request) -> None:
        self.kv.free(req)
        req.reset_for_recompute()
        self.waiting.appendleft(req)
        if self.policy == "lpt":
            self._waiting_output += remaining_output(req)
        self.num_preemptions += 1

    def finish(self, req: Request, status: RequestStatus | None = None) -> None:
        """Remove a request (finished or aborted) and free its blocks. Idempotent."""
        if status is not None:
            req.status = status
        if req in self.running:
            self.running.remove(req)
        elif req in self.waiting:
            self.waiting.remove(req)
            if self.policy == "lpt":
                self._waiting_output -= remaining_output(req)
        self.kv.free(req)
