"""Continuous batching under a per-step token budget.

Each step: running requests first (decodes and unfinished prefill chunks, oldest first), then
waiting requests FCFS while budget, `max_num_seqs` and the free-block watermark allow. A running
request whose last token by length is already in flight (overlap scheduling) is skipped: it ends when
that token arrives, so a further step would only compute a token to discard. When a
running request cannot get a block, the newest running request is preempted (recompute): its
blocks go back to the pool and it returns to the head of the waiting queue. No request is
admitted in a step that preempted, so a preempted request is not immediately displaced again.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from tachyon.engine.kv_cache import KVCacheManager
from tachyon.engine.request import Request, RequestStatus


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
                 enable_chunked_prefill: bool = True, watermark: float = 0.01):
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
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            req = self.waiting[0]
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
            req.status = RequestStatus.RUNNING
            self.running.append(req)
            out.requests.append(req)
            out.num_new_tokens.append(n)
            budget -= n
        return out

    def _preempt(self, req: Request) -> None:
        self.kv.free(req)
        req.reset_for_recompute()
        self.waiting.appendleft(req)
        self.num_preemptions += 1

    def finish(self, req: Request, status: RequestStatus | None = None) -> None:
        """Remove a request (finished or aborted) and free its blocks. Idempotent."""
        if status is not None:
            req.status = status
        if req in self.running:
            self.running.remove(req)
        elif req in self.waiting:
            self.waiting.remove(req)
        self.kv.free(req)
