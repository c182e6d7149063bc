"""One API call's engine requests (one per prompt), merged into a single stream of updates.

`Generation.updates()` yields `(prompt_index, RequestOutput)` with the latest cumulative output of
each prompt that changed; a slow reader gets coalesced updates, so memory stays bounded. On exit
for any reason (finished, client gone, timeout, error) every unfinished engine request is aborted
at once, which frees its KV blocks. Per-request metrics are recorded as each prompt ends.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import AsyncIterator

from tachyon.sampling import RequestOutput, SamplingParams
from tachyon.serving.errors import APIError
from tachyon.serving.metrics import ServerMetrics
from tachyon.serving.registry import ServedModel

logger = logging.getLogger("tachyon.serving.generation")

if sys.version_info >= (3, 11):
    _timeout_at = asyncio.timeout_at
else:  # pragma: no cover
    _timeout_at = None


class _Track:
    """Timing of one engine request, for the latency histograms."""

    def __init__(self) -> None:
        self.first: float | None = None
        self.last: float | None = None
        self.tokens = 0
        self.done = False
        self.output: RequestOutput | None = None


class Generation:
    def __init__(
        self,
        model: ServedModel,
        prompts: list[list[int]],
        params: SamplingParams,
        request_id: str,
        metrics: ServerMetrics,
        *,
        timeout: float,
        arrival: float | None = None,
    ) -> None:
        self.model = model
        self.prompts = prompts
        self.params = params
        self.request_id = request_id
        self.metrics = metrics
        self.arrival = arrival if arrival is not None else time.monotonic()
        self.deadline = self.arrival + timeout
        self.tracks = [_Track() for _ in prompts]
        self._dirty: set[int] = set()
        self._errors: list[BaseException] = []
        self._changed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self.timed_out = False

    def rid(self, i: int) -> str:
        return f"{self.request_id}-{i}" if len(self.prompts) > 1 else self.request_id

    @property
    def ttft(self) -> float | None:
        firsts = [t.first for t in self.tracks if t.first is not None]
        return min(firsts) - self.arrival if firsts else None

    @property
    def queue_time(self) -> float | None:
        m = self.tracks[0].output.metrics if self.tracks[0].output is not None else None
        if m is None:
            return None
        if m.time_in_queue is not None:
            return m.time_in_queue
        if m.first_scheduled_time is not None:
            return max(0.0, m.first_scheduled_time - m.arrival_time)
        return None

    async def _pump(self, i: int) -> None:
        agen = self.model.engine.generate(self.prompts[i], self.params, self.rid(i))
        track = self.tracks[i]
        try:
            async for out in agen:
                self._observe(track, out)
                track.output = out
                self._dirty.add(i)
                self._changed.set()
        except ValueError as e:  # the engine's own request validation
            self._errors.append(APIError(400, str(e)[:300], code="invalid_request"))
        except Exception as e:  # noqa: BLE001 - reported to the client as 503 (engine dead) or 500
            dead = "Dead" in type(e).__name__ or not _healthy(self.model.engine)
            logger.error(
                "engine request failed",
                extra={"request_id": self.rid(i), "error": type(e).__name__},
                exc_info=logger.isEnabledFor(logging.DEBUG),
            )
            self._errors.append(
                APIError(
                    503 if dead else 500,
                    "The engine is not running." if dead else "The engine failed on this request.",
                    code="engine_unavailable" if dead else "engine_error",
                )
            )
        finally:
            track.done = True
            self._changed.set()
            await agen.aclose()

    def _observe(self, track: _Track, out: RequestOutput) -> None:
        now = time.monotonic()
        n = sum(len(o.token_ids) for o in out.outputs)
        new = n - track.tokens
        if new > 0:
            lab = self.model.name
            if track.first is None:
                track.first = now
                self.metrics.ttft.labels(lab).observe(now - self.arrival)
                new -= 1
            if new > 0 and track.last is not None:
                gap = (now - track.last) / new
                for _ in range(min(new, 64)):
                    self.metrics.itl.labels(lab).observe(gap)
            track.last = now
            track.tokens = n

    async def updates(self) -> AsyncIterator[tuple[int, RequestOutput]]:
        """Latest outputs as they change, until every prompt is finished. Raises APIError on timeout."""
        p = self.params
        logger.debug(
            "engine requests start",
            extra={
                "request_id": self.request_id,
                "model": self.model.name,
                "prompts": len(self.prompts),
                "prompt_tokens": [len(x) for x in self.prompts],
                "n": p.n,
                "max_tokens": p.max_tokens,
                "temperature": p.temperature,
                "num_stop": len(p.stop),
                "logprobs": p.logprobs,
            },
        )
        self._tasks = [asyncio.create_task(self._pump(i)) for i in range(len(self.prompts))]
        try:
            while True:
                await self._wait_change()
                dirty = sorted(self._dirty)
                self._dirty.clear()  # pumps may mark more while we yield; those are seen next turn
                for i in dirty:
                    out = self.tracks[i].output
                    if out is not None and out.finished and any(o.finish_reason == "abort" for o in out.outputs):
                        raise APIError(
                            503,
                            "The request was aborted by the server (shutting down or overloaded).",
                            code="aborted",
                        )
                    if out is not None:
                        yield i, out
                if self._errors:
                    raise self._errors[0]
                if all(t.done for t in self.tracks) and not self._dirty:
                    if any(t.output is None or not t.output.finished for t in self.tracks):
                        raise APIError(500, "the engine ended a request without a final output", code="engine_error")
                    return
        finally:
            self.close()

    async def collect(self) -> dict[int, RequestOutput]:
        """The final output of every prompt (non-streaming responses)."""
        final: dict[int, RequestOutput] = {}
        async for i, out in self.updates():
            final[i] = out
        return final

    async def _wait_change(self) -> None:
        if self._changed.is_set():
            self._changed.clear()
            return
        try:
            if _timeout_at is not None:
                loop_deadline = asyncio.get_running_loop().time() + (self.deadline - time.monotonic())
                async with _timeout_at(loop_deadline):
                    await self._changed.wait()
            else:  # pragma: no cover
                await asyncio.wait_for(self._changed.wait(), self.deadline - time.monotonic())
        except (asyncio.TimeoutError, TimeoutError):
            self.timed_out = True
            raise APIError(
                504,
                "The request did not finish within the server's request timeout.",
                code="request_timeout",
                headers={"x-should-retry": "false"},
            ) from None
        self._changed.clear()

    def close(self) -> None:
        """Abort unfinished engine requests (idempotent) and record the end-of-request metrics."""
        for i, task in enumerate(self._tasks):
            if not self.tracks[i].done or not task.done():
                self.model.engine.abort(self.rid(i))
                task.cancel()
        if self._tasks:
            self._record()
            self._tasks = []

    def _record(self) -> None:
        m, lab = self.metrics, self.model.name
        logger.debug(
            "engine requests end",
            extra={
                "request_id": self.request_id,
                "tokens": [t.tokens for t in self.tracks],
                "finished": [bool(t.output and t.output.finished) for t in self.tracks],
                "timed_out": self.timed_out,
            },
        )
        now = time.monotonic()
        m.e2e.labels(lab).observe(now - self.arrival)
        q = self.queue_time
        if q is not None:
            m.queue.labels(lab).observe(q)
        for t in self.tracks:
            out = t.output
            prompt = len(out.prompt_token_ids) if out is not None else 0
            m.prompt_tokens.labels(lab).inc(prompt)
            m.prompt_len.labels(lab).observe(prompt)
            m.gen_tokens.labels(lab).inc(t.tokens)
            m.gen_len.labels(lab).observe(t.tokens)
            if t.first is not None and t.last is not None and t.tokens > 1:
                m.tpot.labels(lab).observe((t.last - t.first) / (t.tokens - 1))
            reasons = [o.finish_reason for o in out.outputs] if out is not None else []
            for r in reasons or [None]:
                m.success.labels(lab, r or "abort").inc()


def _healthy(engine: object) -> bool:
    try:
        return bool(engine.is_healthy())  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001
        return False
