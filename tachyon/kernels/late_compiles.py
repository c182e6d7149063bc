"""Triton compiles after start-up: the request whose launch misses Triton's in-memory kernel cache waits for the
compile (or its load from Triton's disk cache), tens to hundreds of ms. Start-up's compile pass is meant to leave
none; a `LateCompileWatch` armed once the engine is ready counts what it missed and logs each, naming the kernel
and its specialisation, so a serving TTFT outlier can be told from one.

Triton calls `knobs.runtime.jit_cache_hook` on every in-memory cache miss, before compiling (a hook returning
True would skip the compile; ours never does), and `jit_post_compile_hook` once the kernel is in the cache. One
process-wide pair of hooks fans out to every armed watch, and calls through to hooks installed before it. While any
engine starts up (`engine_starting`) no watch counts: a second engine's start-up in the same process (a multi-model
server) is not late for the first, though a late compile of the first's during it goes uncounted. CUDA graph
replays launch no Python and never miss. Without Triton's knobs (triton < 3.4) a watch arms nothing.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

_MAX_KEPT = 64  # events a watch keeps; the count goes on past it
_MAX_SPEC = 1500  # characters of a specialisation kept


@dataclass
class LateCompile:
    """One cache miss after arming: the kernel's qualified name, Triton's description of the specialisation (its
    `repr`, launch options and argument types, then its cache key), when it began (time.monotonic) and how long until
    the kernel sat in the cache (None while in flight, or when Triton compiled asynchronously and has not finished)."""

    kernel: str
    specialization: str
    started: float
    seconds: float | None = None


class LateCompileWatch:
    """Counts Triton cache misses from `arm()` on. Owned by whoever armed it (the engine, for its lifetime);
    `disarm()` (or losing the last reference) stops it. Thread-safe: Triton may compile on any launching thread."""

    def __init__(self, on_compile: Callable[[LateCompile], None] | None = None) -> None:
        self.count = 0
        self.events: list[LateCompile] = []
        self._on_compile = on_compile
        self._open: dict[str, LateCompile] = {}
        self._lock = threading.Lock()
        self.armed = False

    def arm(self) -> bool:
        """Start counting; False (and nothing armed) where Triton has no runtime hooks."""
        if not _install():
            return False
        with _registry_lock:
            _watches.add(self)
        self.armed = True
        return True

    def disarm(self) -> None:
        with _registry_lock:
            _watches.discard(self)
        self.armed = False

    def seconds(self) -> float:
        """Summed duration of the finished compiles kept in `events`."""
        with self._lock:
            return sum(e.seconds for e in self.events if e.seconds is not None)

    def _miss(self, key: str, kernel: str, specialization: str) -> None:
        event = LateCompile(kernel, specialization, time.monotonic())
        with self._lock:
            self.count += 1
            if len(self.events) < _MAX_KEPT:
                self.events.append(event)
            self._open[key] = event

    def _done(self, key: str) -> None:
        with self._lock:
            event = self._open.pop(key, None)
        if event is None:
            return
        event.seconds = time.monotonic() - event.started
        if self._on_compile is not None:
            self._on_compile(event)


def log_late_compile(event: LateCompile) -> None:
    """The engine's `on_compile`: one warning per late compile."""
    log.warning("Triton compiled %s after start-up in %.0f ms (a launch the start-up compile pass did not cover): %s",
                event.kernel, 1e3 * (event.seconds or 0.0), event.specialization)


_watches: weakref.WeakSet[LateCompileWatch] = weakref.WeakSet()
_registry_lock = threading.Lock()
_starting = 0  # engines inside engine_starting()


@contextmanager
def engine_starting() -> Iterator[None]:
    """An engine's start-up: its compiles are not late for any watch (nestable, any thread)."""
    global _starting
    with _registry_lock:
        _starting += 1
    try:
        yield
    finally:
        with _registry_lock:
            _starting -= 1


_installed = False
_previous: dict[str, Any] = {}  # the hooks installed before ours ("cache", "post"), called through


def _knobs():
    try:
        from triton import knobs
    except ImportError:
        return None
    runtime = getattr(knobs, "runtime", None)
    if runtime is None or not hasattr(runtime, "jit_cache_hook") or not hasattr(runtime, "jit_post_compile_hook"):
        return None
    return runtime


def _key(kwargs: dict[str, Any]) -> str:  # Triton passes a fresh `fn` info object to each hook
    return f"{_kernel_name(kwargs.get('fn'))}:{kwargs.get('key')!s}"


def _kernel_name(fn: Any) -> str:
    module, name = getattr(fn, "module", None), getattr(fn, "name", None)
    return f"{module}.{name}" if module and name else str(fn)


def _cache_hook(*args: Any, **kwargs: Any) -> Any:
    """Triton's jit_cache_hook: a launch missed the in-memory cache and is about to compile. Our part never raises
    into the launch (a hook contract Triton changed shows as a count that stays 0, and one debug line)."""
    prev = _previous.get("cache")
    skip = prev(*args, **kwargs) if prev is not None else None
    try:
        if not kwargs.get("is_manual_warmup") and not _starting:
            key, name = _key(kwargs), _kernel_name(kwargs.get("fn"))
            # Triton's repr (launch options, argument types) is cut short on some versions: the cache key, which
            # holds each argument's specialisation (pointer alignment, ints equal to 1 or divisible by 16), goes too
            spec = f"{kwargs.get('repr', '')} key={kwargs.get('key')!s}"[:_MAX_SPEC]
            for watch in list(_watches):
                watch._miss(key, name, spec)
    except Exception:  # noqa: BLE001 - a diagnostic must not fail the launch
        log.debug("late-compile watch: unexpected cache-hook arguments", exc_info=True)
    return skip


def _post_compile_hook(*args: Any, **kwargs: Any) -> Any:
    """Triton's jit_post_compile_hook: the kernel now sits in the in-memory cache."""
    prev = _previous.get("post")
    out = prev(*args, **kwargs) if prev is not None else None
    try:
        key = _key(kwargs)
        for watch in list(_watches):
            watch._done(key)
    except Exception:  # noqa: BLE001 - as above
        log.debug("late-compile watch: unexpected post-compile-hook arguments", exc_info=True)
    return out


def _install() -> bool:
    global _installed
    runtime = _knobs()
    if runtime is None:
        return False
    with _registry_lock:
        if not _installed:
            _previous["cache"] = runtime.jit_cache_hook
            _previous["post"] = runtime.jit_post_compile_hook
            runtime.jit_cache_hook = _cache_hook
            runtime.jit_post_compile_hook = _post_compile_hook
            _installed = True
    return True
