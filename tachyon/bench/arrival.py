"""Arrival processes for open-loop load: seeded send-time offsets (seconds from the start).

Contract: `arrival_times(n, process, rate, burstiness, seed)` returns n non-decreasing offsets.
`constant`: every 1/rate; `poisson`: exponential gaps of mean 1/rate; `gamma`: gamma gaps of mean
1/rate with shape = burstiness (< 1 burstier than Poisson, 1 = Poisson, > 1 smoother).
Closed-loop concurrency has no schedule (`process="closed"` returns None).
"""

from __future__ import annotations

import random

PROCESSES = ("closed", "constant", "poisson", "gamma")


def arrival_times(n: int, process: str, rate: float | None = None, burstiness: float = 1.0,
                  seed: int = 0) -> list[float] | None:
    if process not in PROCESSES:
        raise ValueError(f"arrival process must be one of {PROCESSES}, got {process!r}")
    if process == "closed":
        return None
    if rate is None or rate <= 0 or rate == float("inf"):
        return [0.0] * n  # everything at once
    if burstiness <= 0:
        raise ValueError(f"burstiness must be > 0, got {burstiness}")
    rng = random.Random(seed)
    t, out = 0.0, []
    for i in range(n):
        if i > 0:
            if process == "constant":
                gap = 1.0 / rate
            elif process == "poisson":
                gap = rng.expovariate(rate)
            else:
                gap = rng.gammavariate(burstiness, 1.0 / (rate * burstiness))
            t += gap
        out.append(t)
    return out
