"""Liveness and readiness.

Liveness: every engine thread alive and not errored. Readiness additionally runs a real 1-token
greedy generation on each engine, at most once per `interval` seconds (concurrent probes share
one run; the result is cached), and fails while draining or when a probe errors or exceeds
`timeout` (a stuck engine). An engine holding requests that finished a step within `timeout`
counts as ready without a probe: the probe would queue behind those requests, and a busy server
would look unready exactly when it is loaded.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import TYPE_CHECKING

from tachyon.sampling import SamplingParams

if TYPE_CHECKING:
    from tachyon.serving.admission import Admission
    from tachyon.serving.registry import ModelRegistry, ServedModel


class Readiness:
    def __init__(self, registry: ModelRegistry, admission: Admission, interval: float, timeout: float) -> None:
        self.registry = registry
        self.admission = admission
        self.interval = interval
        self.timeout = timeout
        self._last: tuple[float, bool, str] | None = None
        self._running: asyncio.Task[tuple[bool, str]] | None = None

    def alive(self) -> tuple[bool, str]:
        for m in self.registry.models:
            try:
                ok = bool(m.engine.is_healthy())
            except Exception:  # noqa: BLE001
                ok = False
            if not ok:
                return False, f"engine for {m.name} is not running"
        return True, "ok"

    async def ready(self) -> tuple[bool, str]:
        if self.admission.draining:
            return False, "draining"
        ok, why = self.alive()
        if not ok:
            return ok, why
        now = time.monotonic()
        if self._last is not None and now - self._last[0] < self.interval:
            return self._last[1], self._last[2]
        if self._running is None or self._running.done():
            self._running = asyncio.create_task(self._probe_all())
        ok, why = await asyncio.shield(self._running)
        self._last = (time.monotonic(), ok, why)
        return (False, "draining") if self.admission.draining else (ok, why)

    async def _probe_all(self) -> tuple[bool, str]:
        for m in self.registry.models:
            ok, why = await self._probe(m)
            if not ok:
                return ok, why
        return True, "ok"

    def _progressing(self, model: ServedModel) -> bool:
        """Whether the engine holds requests and finished a step within the last `timeout` seconds."""
        last = getattr(model.engine, "last_step_time", None)
        try:
            stats = model.engine.stats()
            busy = stats.num_running + stats.num_waiting > 0
        except Exception:  # noqa: BLE001 - an engine without these stats is probed
            return False
        return busy and last is not None and time.monotonic() - last < self.timeout

    async def _probe(self, model: ServedModel) -> tuple[bool, str]:
        if self._progressing(model):
            return True, "ok"
        params = SamplingParams(max_tokens=1, temperature=0.0, ignore_eos=True)
        rid = f"health-{uuid.uuid4().hex[:12]}"
        prompt = [0]
        agen = model.engine.generate(prompt, params, rid)

        async def run() -> object:
            last = None
            async for out in agen:
                last = out
            return last

        try:
            last = await asyncio.wait_for(run(), self.timeout)
            if last is None or not last.finished or not last.outputs or not last.outputs[0].token_ids:
                return False, f"engine for {model.name} produced no token"
            return True, "ok"
        except asyncio.TimeoutError:
            return False, f"engine for {model.name} did not generate within {self.timeout:g} s"
        except Exception as e:  # noqa: BLE001
            return False, f"engine for {model.name} failed to generate ({type(e).__name__})"
        finally:
            model.engine.abort(rid)
            await agen.aclose()
