"""Per-key request and token rate limits through the `limits` library (moving window).

Storage defaults to in-process memory; pass a `limits` storage URI (e.g. redis://) to share the
counters between several server processes so that N processes do not multiply the limit.
"""

from __future__ import annotations

import math
import time

from limits import RateLimitItem, parse
from limits.storage import storage_from_string
from limits.strategies import MovingWindowRateLimiter

from tachyon.serving.errors import APIError


class RateLimiter:
    """`hit_request(key)` before any work; `check_tokens` / `charge_tokens` around generation."""

    def __init__(self, requests: str | None, tokens: str | None, storage_uri: str = "memory://") -> None:
        self._limiter = MovingWindowRateLimiter(storage_from_string(storage_uri))
        self._req: RateLimitItem | None = parse(requests) if requests else None
        self._tok: RateLimitItem | None = parse(tokens) if tokens else None

    def _retry_after(self, item: RateLimitItem, key: str) -> int:
        stats = self._limiter.get_window_stats(item, "tachyon", key)
        return max(1, math.ceil(stats.reset_time - time.time()))

    def hit_request(self, key: str) -> None:
        """Count one request for `key`; 429 with Retry-After once the window is full."""
        if self._req is not None and not self._limiter.hit(self._req, "tachyon", key):
            wait = self._retry_after(self._req, key)
            raise _limited(f"Rate limit reached: {self._req.amount} requests per {self._req.get_expiry()} s "
                           f"for this API key; retry after {wait} s.", wait)

    def check_tokens(self, key: str, tokens: int) -> None:
        """429 when `tokens` more would exceed the key's token budget (nothing is charged)."""
        if self._tok is None:
            return
        if tokens > self._tok.amount:
            raise _limited(f"Request needs {tokens} tokens, more than the per-key limit of "
                           f"{self._tok.amount} tokens per {self._tok.get_expiry()} s.", 60)
        if not self._limiter.test(self._tok, "tachyon", key, cost=max(tokens, 1)):
            wait = self._retry_after(self._tok, key)
            raise _limited(f"Token rate limit reached: {self._tok.amount} tokens per {self._tok.get_expiry()} s "
                           f"for this API key; retry after {wait} s.", wait)

    def charge_tokens(self, key: str, tokens: int) -> None:
        """Record tokens actually used (prompt + completion) once a request ends. A charge larger
        than what is left fills the window (`limits` refuses over-budget hits outright)."""
        if self._tok is None or tokens <= 0:
            return
        if not self._limiter.hit(self._tok, "tachyon", key, cost=min(tokens, self._tok.amount)):
            left = self._limiter.get_window_stats(self._tok, "tachyon", key).remaining
            if left > 0:
                self._limiter.hit(self._tok, "tachyon", key, cost=left)


def _limited(message: str, retry_after: int) -> APIError:
    """The 429 every limit answers with (OpenAI's error code, Retry-After in seconds)."""
    return APIError(429, message, code="rate_limit_exceeded", headers={"Retry-After": str(retry_after)})
