"""Bounded admission: at most `capacity` sequences in the engines at once (running slots + queue).

Beyond it a request is answered 429 with Retry-After at once; nothing waits in an unbounded
queue. While draining (SIGTERM) every new request gets 503. `in_flight` reaching 0 ends a drain.
"""

from __future__ import annotations

import asyncio

from tachyon.serving.errors import APIError


class Admission:
    """Counts admitted sequences on the event loop thread (no locking needed)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.in_flight = 0
        self.draining = False
        self._idle = asyncio.Event()
        self._idle.set()

    def check_open(self) -> None:
        if self.draining:
            raise APIError(
                503,
                "The server is shutting down; retry on another replica.",
                code="server_draining",
                headers={"Retry-After": "5"},
            )

    def acquire(self, cost: int = 1) -> Ticket:
        """Admit `cost` sequences or raise 503 (draining) / 429 (full). Release the ticket when done."""
        self._take(cost)
        return Ticket(self, cost)

    def _take(self, cost: int) -> None:
        self.check_open()
        if self.in_flight + cost > self.capacity:
            raise APIError(
                429,
                f"The server is at capacity ({self.capacity} sequences running or queued); retry shortly.",
                code="server_overloaded",
                headers={"Retry-After": "1"},
            )
        self.in_flight += cost
        self._idle.clear()

    def _release(self, cost: int) -> None:
        self.in_flight -= cost
        if self.in_flight == 0:
            self._idle.set()

    async def wait_idle(self, timeout: float) -> bool:
        """True when every admitted request ended within `timeout` seconds."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
            return True
        except asyncio.TimeoutError:
            return False


class Ticket:
    """One admission; `release()` is idempotent."""

    def __init__(self, owner: Admission, cost: int) -> None:
        self._owner: Admission | None = owner
        self.cost = cost

    def grow(self, cost: int) -> None:
        """Raise this admission to `cost` sequences in total (429 when that does not fit)."""
        if self._owner is not None and cost > self.cost:
            self._owner._take(cost - self.cost)
            self.cost = cost

    def release(self) -> None:
        if self._owner is not None:
            self._owner._release(self.cost)
            self._owner = None
