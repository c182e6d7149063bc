"""Penalised requests' token counts, kept on the device between draws (kernels.apply_penalties reads them).

Contract: the Sampler is the only user. A penalised request gets a slot at its first draw: a row of `counts`
(int32 [capacity, V], its output tokens counted) and of `seen` (bool [capacity, V], its prompt tokens), built
from the host's tokens. After each draw `record` adds the drawn token on the device, so a step's penalties cost
no host work proportional to the history and no host-device sync. The object owns these tensors and its slot
map; a slot holds its request (a strong reference, so the map's `id` keys stay unique) until the request finishes
or waits (preempted), when a later allocation may take the slot back. A slot whose request's history does not
match what it counted (a token dropped, a preemption that took the slot) is rebuilt from the host's tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from tachyon import kernels
from tachyon.engine.request import Request, RequestStatus
from tachyon.engine.staging import aligned_rows, flat_row_indices, to_device_async

MIN_CAPACITY = 8


@dataclass
class Picked:
    """`PenaltyCounts.apply`'s rows (device), their slots (device, and as host ints) for `record`."""
    rows: torch.Tensor
    slots: torch.Tensor
    slot_ids: list[int]


class PenaltyCounts:
    def __init__(self) -> None:
        self.counts: torch.Tensor | None = None
        self.seen: torch.Tensor | None = None
        self._owner: list[Request | None] = []
        self._counted: list[int] = []  # output tokens each slot counts
        self._slot: dict[int, int] = {}  # id(request) -> slot
        self.num_rebuilt = 0  # slots (re)built from host tokens (for tests and stats)

    @property
    def capacity(self) -> int:
        return len(self._owner)

    @torch.inference_mode()  # its tensors are made and changed in inference mode, wherever the caller runs
    def apply(self, logits: torch.Tensor, rows: list[int], reqs: list[Request],
              step_offset: int = 0) -> Picked:
        """In place on logits[rows[k]] (contiguous fp32): reqs[k]'s penalties over its history before this draw,
        which holds reqs[k].num_sampled + step_offset output tokens (step_offset -1: the draw's own pending
        placeholder is counted there). Returns what `record` needs after the draw."""
        vocab, dev = logits.shape[-1], logits.device
        slots = self._slots(reqs, step_offset, vocab, dev)
        rows_t, slots_t = aligned_rows([rows, slots], torch.long, dev)  # one copy, as the warm-up's compile had them
        params = to_device_async(torch.tensor([[r.params.repetition_penalty, r.params.frequency_penalty,
                                                r.params.presence_penalty] for r in reqs], dtype=torch.float32), dev)
        kernels.apply_penalties(logits, rows_t, slots_t, self.counts, self.seen, params)
        return Picked(rows_t, slots_t, slots)

    @torch.inference_mode()
    def record(self, picked: Picked, tokens: torch.Tensor) -> None:
        """Count the tokens drawn for `apply`'s rows: tokens[rows[k]] (int64 device tensor)."""
        flat = picked.slots * self.counts.shape[-1] + tokens.index_select(0, picked.rows)
        self.counts.view(-1).index_add_(0, flat, torch.ones(flat.shape, dtype=torch.int32, device=flat.device))
        for s in picked.slot_ids:
            self._counted[s] += 1

    def check_integrity(self) -> None:
        """Each mapped request owns exactly its slot; every owned slot is mapped; counts are never negative."""
        owned = {id(o): s for s, o in enumerate(self._owner) if o is not None}
        assert owned == self._slot, f"penalty slots: owners {owned} against map {self._slot}"
        assert all(c >= 0 for c in self._counted)
        if self.counts is not None:
            assert self.counts.shape[0] == self.seen.shape[0] == self.capacity
            assert int(self.counts.min()) >= 0

    def _slots(self, reqs: list[Request], step_offset: int, vocab: int, device: torch.device) -> list[int]:
        """Each request's slot, made or rebuilt from the host's tokens when it does not hold its history."""
        if self.counts is None or self.counts.shape[-1] != vocab or self.counts.device != device:
            self._allocate(MIN_CAPACITY, vocab, device)
        slots, stale = [], []
        for r in reqs:
            s = self._slot.get(id(r))
            if s is None:
                s = self._take(r, reqs)
                stale.append((s, r))
            elif self._counted[s] != r.num_sampled + step_offset:
                stale.append((s, r))
            slots.append(s)
        if stale:
            self._rebuild(stale, step_offset)
        return slots

    def _take(self, r: Request, batch: list[Request]) -> int:
        free = [s for s, o in enumerate(self._owner) if o is None]
        if not free:
            self._reclaim(batch)
            free = [s for s, o in enumerate(self._owner) if o is None]
        if not free:
            old = self.capacity
            self._allocate(2 * old, self.counts.shape[-1], self.counts.device)
            free = [old]
        s = free[0]
        self._owner[s] = r
        self._slot[id(r)] = s
        return s

    def _reclaim(self, batch: list[Request]) -> None:
        """Free the slots of requests that finished or wait (preempted), but none of this batch's."""
        keep = {id(r) for r in batch}
        for s, o in enumerate(self._owner):
            if o is not None and id(o) not in keep and (o.finished or o.status != RequestStatus.RUNNING):
                del self._slot[id(o)]
                self._owner[s] = None

    def _allocate(self, capacity: int, vocab: int, device: torch.device) -> None:
        """(Re)size to `capacity` slots, keeping the slots held (a new vocab or device drops them all)."""
        counts = torch.zeros(capacity, vocab, dtype=torch.int32, device=device)
        seen = torch.zeros(capacity, vocab, dtype=torch.bool, device=device)
        same = self.counts is not None and self.counts.shape[-1] == vocab and self.counts.device == device
        if same:
            counts[: self.capacity] = self.counts
            seen[: self.capacity] = self.seen
            extra = capacity - self.capacity
            self._owner += [None] * extra
            self._counted += [0] * extra
        else:
            self._owner, self._counted, self._slot = [None] * capacity, [0] * capacity, {}
        self.counts, self.seen = counts, seen

    def _rebuild(self, stale: list[tuple[int, Request]], step_offset: int) -> None:
        """Rows of `stale` slots from their requests' host tokens (prompt -> seen, outputs -> counts), every row
        at once."""
        for _, r in stale:
            if r.num_output_tokens != r.num_sampled + step_offset:
                raise RuntimeError(f"request {r.request_id}: penalties need its {r.num_pending} pending tokens")
        dev, vocab = self.counts.device, self.counts.shape[-1]
        slot_ids = [s for s, _ in stale]
        idx = to_device_async(torch.tensor(slot_ids, dtype=torch.long), dev)
        self.counts.index_fill_(0, idx, 0)
        self.seen.index_fill_(0, idx, False)
        prompt = flat_row_indices(slot_ids, [torch.tensor(r.prompt_token_ids) for _, r in stale], vocab, dev)
        self.seen.view(-1).index_fill_(0, prompt, True)  # a scalar argument: no copy, no sync
        out = flat_row_indices(slot_ids, [torch.tensor(r.output_token_ids, dtype=torch.long) for _, r in stale],
                               vocab, dev)
        self.counts.view(-1).index_add_(0, out, torch.ones(out.shape, dtype=torch.int32, device=dev))
        for s, r in stale:
            self._counted[s] = r.num_output_tokens
        self.num_rebuilt += len(stale)
