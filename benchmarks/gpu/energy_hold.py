"""Holding one GPU step (a CUDA-graph replay) back to back at the board's power cap: its time and NVML energy per
call, with the board's power and clock over the hold. Needs torch and a CUDA device; NVML is optional (no energy)."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
from clock_sampler import ClockSampler  # same folder (the script folder is on sys.path)


def hold(fn: Callable[[], object], seconds: float, energy: Callable[[], float] | None, batch: int = 10,
         sync_every: int = 50) -> dict:
    """Calls `fn` (it enqueues GPU work and returns) in batches of `batch` for `seconds` of host time, the host kept
    within `sync_every` calls of the GPU. Returns calls, ms_per_call (CUDA events), j_per_call (None without
    `energy`, a reader of the board's energy counter in joules) and ClockSampler.summary()'s power and clock."""
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    n = 0
    with ClockSampler(0.05) as clocks:
        e0 = energy() if energy else None
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        while time.perf_counter() - t0 < seconds:
            for _ in range(batch):
                fn()
            n += batch
            if n % sync_every == 0:
                end.record()
                end.synchronize()
        end.record()
        torch.cuda.synchronize()
        e1 = energy() if energy else None
    return {"calls": n, "ms_per_call": start.elapsed_time(end) / n,
            "j_per_call": (e1 - e0) / n if e1 is not None else None, **clocks.summary()}
