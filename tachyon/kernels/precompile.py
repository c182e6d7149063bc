"""Compile Triton kernels in parallel during warm-up.

`compile_only(device)` is a context in which every Triton kernel launch compiles (in a thread pool,
deduplicated by Triton's own cache key) instead of running; on exit every compile has finished, sits
in Triton's in-memory and on-disk caches and has its CUDA module loaded, so the same launches afterwards
run, or are captured into a CUDA graph, without compiling or loading (kernels/module_loads.py). Torch
ops inside the context still run, on whatever the skipped kernels left in their outputs: the caller
must discard every result and must not branch on device values there. Needs CUDA and triton's
AsyncCompileMode (triton >= 3.4); otherwise launches run normally. Compile failures are ignored here:
the real launch afterwards compiles again and raises.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from tachyon.kernels._triton import HAS_TRITON
from tachyon.kernels.module_loads import load_modules


def _async_mode():
    if not HAS_TRITON or os.environ.get("TRITON_INTERPRET") == "1":
        return None
    try:
        from triton.runtime._async_compile import AsyncCompileMode
        from triton.runtime.jit import JITFunction
    except ImportError:
        return None
    return AsyncCompileMode, JITFunction


@dataclass
class CompilePass:
    """What one compile_only context did: whether launches compiled instead of running (`active`; the object is
    truthy iff so), the distinct kernels launched, the modules loaded at exit, and the seconds spent running the
    body, then waiting for the compiles still in flight, then loading modules."""

    active: bool
    kernels: int = 0
    loaded: int = 0
    body_s: float = 0.0
    wait_s: float = 0.0
    load_s: float = 0.0

    def __bool__(self) -> bool:
        return self.active

    def summary(self) -> dict[str, float | int]:
        return dict(kernels=self.kernels, modules_loaded=self.loaded, body_s=self.body_s, wait_s=self.wait_s,
                    load_s=self.load_s)


@contextmanager
def compile_only(device: torch.device, workers: int | None = None) -> Iterator[CompilePass]:
    """Yields a CompilePass, truthy when launches compile in parallel instead of running (see the module
    docstring), falsy when they run normally (CPU, or a triton without async compilation); its figures are
    final when the context exits."""
    mode = _async_mode() if device.type == "cuda" and os.environ.get("TACHYON_PARALLEL_COMPILE", "1") != "0" else None
    if mode is None:
        yield CompilePass(False)
        return
    AsyncCompileMode, JITFunction = mode
    original = JITFunction.run
    stats = CompilePass(True)
    compiled: dict[int, object] = {}  # each kernel (or its compile's future) once

    def run(self, *args, grid, warmup, **kwargs):  # compile (asynchronously) but never launch
        kernel = original(self, *args, grid=grid, warmup=True, **kwargs)
        if kernel is not None:
            compiled.setdefault(id(kernel), kernel)
        return kernel

    idx = device.index if device.index is not None else torch.cuda.current_device()
    n = workers or max(1, min(16, os.cpu_count() or 1))
    t0 = time.perf_counter()
    with ThreadPoolExecutor(n, initializer=torch.cuda.set_device, initargs=(idx,)) as pool:
        JITFunction.run = run
        try:
            with AsyncCompileMode(pool, ignore_errors=True):
                try:
                    yield stats
                finally:
                    t1 = time.perf_counter()
        finally:
            JITFunction.run = original
        t2 = time.perf_counter()
        stats.loaded = load_modules(compiled.values(), pool)  # every future has finished (AsyncCompileMode's exit)
    stats.kernels = len(compiled)
    stats.body_s, stats.wait_s, stats.load_s = t1 - t0, t2 - t1, time.perf_counter() - t2
