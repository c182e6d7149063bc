"""AsyncEngine: LLMEngine driven by its own thread, with an asyncio streaming API for the server.

Threading contract: only the engine thread touches the LLMEngine's mutable state. Other threads
talk to it through a command queue (add, abort) and receive outputs on per-request asyncio
queues through `loop.call_soon_threadsafe`. Tokenisation and validation (`make_group`) run in a
worker thread of the caller's loop, so a huge prompt never blocks the event loop or the engine.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import torch

from tachyon.config import EngineConfig
from tachyon.engine.engine import EngineStats, LLMEngine
from tachyon.engine.outputs import RequestGroup
from tachyon.sampling import RequestOutput, SamplingParams

log = logging.getLogger("tachyon.engine")


class EngineDeadError(RuntimeError):
    """The engine thread has stopped; no request can be served."""


class EngineStepError(RuntimeError):
    """A step raised: every request in flight is failed with this (its cause the step's exception), the engine
    stays up. Never a ValueError, whatever the cause: the requests' own input was validated before they ran."""


# Consecutive failed steps (none succeeding between them) after which the engine counts as dead: a fault that every
# step hits (a corrupt device context, a broken kernel) must show on /health, not answer every request with a 500.
MAX_FAILED_STEPS = 3


def _device_fault(e: BaseException) -> bool:
    """Whether a step's exception leaves the device unusable (a CUDA error other than running out of memory): the
    engine stops at the first such step."""
    if isinstance(e, torch.cuda.OutOfMemoryError):
        return False
    accel = getattr(torch, "AcceleratorError", None)
    return (accel is not None and isinstance(e, accel)) or "CUDA error" in str(e)


@dataclass
class _Stream:
    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue


class AsyncEngine:
    def __init__(self, config: EngineConfig | None = None, *, engine: LLMEngine | None = None):
        self.engine = engine or LLMEngine(config or EngineConfig())
        self.config = self.engine.config
        self.tokenizer = self.engine.tokenizer
        self.model_name = self.engine.model_name
        self.max_model_len = self.engine.max_model_len
        self._cmds: queue.SimpleQueue = queue.SimpleQueue()
        self._wake = threading.Event()
        self._streams: dict[str, _Stream] = {}
        self._streams_lock = threading.Lock()
        self._stop = False
        self._error: BaseException | None = None
        self._stats = self.engine.stats()
        self.last_step_time = time.monotonic()
        self._thread = threading.Thread(target=self._loop, name="tachyon-engine", daemon=True)
        self._thread.start()
        # the llguidance tokenizer (~0.4 s), built off the request path: the first structured request then finds it
        threading.Thread(target=self.engine.grammars.prepare, name="tachyon-grammar-prep", daemon=True).start()

    # ---- public API -----------------------------------------------------------------------------
    async def generate(self, prompt: str | list[int], params: SamplingParams,
                       request_id: str) -> AsyncIterator[RequestOutput]:
        """Stream cumulative outputs; the last has finished=True. Leaving early aborts the request."""
        if not self.is_healthy():
            raise EngineDeadError("the engine is not running")
        loop = asyncio.get_running_loop()
        group = await loop.run_in_executor(None, lambda: self.engine.make_group(request_id, prompt, params))
        stream = _Stream(loop, asyncio.Queue())
        with self._streams_lock:
            if request_id in self._streams:
                raise ValueError(f"request_id {request_id!r} is already in use")
            self._streams[request_id] = stream
        finished = False
        try:
            self._send(("add", group))
            while True:
                item = await stream.queue.get()
                while not stream.queue.empty() and not isinstance(item, BaseException) and not item.finished:
                    item = stream.queue.get_nowait()  # outputs are cumulative: the newest suffices
                if isinstance(item, BaseException):
                    finished = True
                    raise item
                finished = item.finished
                yield item
                if finished:
                    return
        finally:
            with self._streams_lock:
                self._streams.pop(request_id, None)
            if not finished:
                self.abort(request_id)

    def abort(self, request_id: str) -> None:
        """Thread-safe and idempotent; the engine frees the request's blocks on its next loop turn."""
        self._send(("abort", request_id))

    def stats(self) -> EngineStats:
        return self._stats

    def is_healthy(self) -> bool:
        return self._thread.is_alive() and self._error is None and not self._stop

    def check_integrity(self) -> None:
        """Block-pool invariant, checked on the engine thread."""
        done = threading.Event()
        box: list = []
        self._send(("check", (done, box)))
        if not done.wait(10):
            raise TimeoutError("engine thread did not answer the integrity check")
        if box:
            raise box[0]

    def shutdown(self) -> None:
        self._stop = True
        self._wake.set()
        self._thread.join(timeout=30)

    # ---- engine thread ------------------------------------------------------------------------
    def _send(self, cmd: tuple) -> None:
        self._cmds.put(cmd)
        self._wake.set()

    def _loop(self) -> None:
        failed = 0  # consecutive failed steps
        try:
            while not self._stop:
                self._drain_commands()
                if not self.engine.has_unfinished():
                    self._stats = self.engine.stats()
                    self._wake.wait(0.05)
                    self._wake.clear()
                    continue
                try:
                    outs = self.engine.step()
                except Exception as e:  # a bug in a step: fail the requests in flight, stay up unless it persists
                    failed += 1
                    log.exception("engine step failed")
                    device = _device_fault(e)
                    if device or failed >= MAX_FAILED_STEPS:
                        why = "a device error" if device else f"{failed} steps in a row failed"
                        raise EngineDeadError(f"engine stopped: {why} ({type(e).__name__})") from e
                    err = EngineStepError(f"engine step failed ({type(e).__name__})")
                    err.__cause__ = e
                    self._fail_all(err)
                    continue
                failed = 0
                self.last_step_time = time.monotonic()
                self._stats = self.engine.stats()
                for out in outs:
                    self._deliver(out.request_id, out)
        except BaseException as e:  # fatal: a persistent step failure, or a bug in the loop itself
            self._error = e
            log.exception("engine thread died")
            self._fail_all(EngineDeadError(str(e)))

    def _drain_commands(self) -> None:
        while True:
            try:
                kind, arg = self._cmds.get_nowait()
            except queue.Empty:
                return
            if kind == "add":
                group: RequestGroup = arg
                with self._streams_lock:
                    live = group.request_id in self._streams
                if not live:  # the caller left before the engine saw the request
                    continue
                try:
                    self.engine.add_group(group)
                except ValueError as e:
                    self._deliver(group.request_id, e)
            elif kind == "abort":
                self.engine.abort(arg)
            elif kind == "check":
                done, box = arg
                try:
                    self.engine.check_integrity()
                except AssertionError as e:
                    box.append(e)
                done.set()
        self._stats = self.engine.stats()

    def _deliver(self, request_id: str, item) -> None:
        with self._streams_lock:
            stream = self._streams.get(request_id)
        if stream is None:
            self.engine.abort(request_id)  # nobody listens any more
            return
        try:
            stream.loop.call_soon_threadsafe(stream.queue.put_nowait, item)
        except RuntimeError:  # the caller's loop is closed
            self.engine.abort(request_id)

    def _fail_all(self, exc: BaseException) -> None:
        with self._streams_lock:
            ids = list(self._streams)
        for rid in ids:
            self.engine.abort(rid)
            self._deliver(rid, exc)
