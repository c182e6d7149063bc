"""Compile Triton kernels in parallel during warm-up.

`compile_only(device)` is a context in which every Triton kernel launch compiles (in a thread pool,
deduplicated by Triton's own cache key) instead of running; on exit every compile has finished and sits
in Triton's in-memory and on-disk caches, so the same launches afterwards run without compiling; once
CompilePass.load_modules has run they are also captured into a CUDA graph without an eager run first
(kernels/module_loads.py). Torch ops inside the context still run, on whatever the skipped kernels left
in their outputs: the caller must discard every result and must not branch on device values there.
Needs CUDA and triton's AsyncCompileMode (triton >= 3.4); otherwise launches run normally. Compile
failures are ignored here: the real launch afterwards compiles again and raises.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from tachyon.kernels._triton import HAS_TRITON
from tachyon.kernels.module_loads import build_launchers, load_modules


def _async_mode():
    if not HAS_TRITON or os.environ.get("TRITON_INTERPRET") == "1":
        return None
    try:
        from triton.runtime._async_compile import AsyncCompileMode
        from triton.runtime.jit import JITFunction
    except ImportError:
        return None
    return AsyncCompileMode, JITFunction


def _pool(device: torch.device, workers: int | None) -> ThreadPoolExecutor:
    idx = device.index if device.index is not None else torch.cuda.current_device()
    n = workers or max(1, min(16, os.cpu_count() or 1))
    return ThreadPoolExecutor(n, initializer=torch.cuda.set_device, initargs=(idx,))


@dataclass
class CompilePass:
    """What one compile_only context did: whether launches compiled instead of running (`active`; the object is
    truthy iff so), the distinct kernels its launches compiled (or found compiled), and the seconds spent running
    the body, then waiting for the compiles still in flight; after `load_modules`, how many modules it loaded and
    its seconds. The kernels' modules are not loaded by the pass: where device allocations land depends on when
    they load (a start-up layout that decode speed is sensitive to), so the owner loads them when it chooses.
    The pass also builds each kernel's host launcher on its threads (`launchers_built`, `launcher_s`;
    kernels/module_loads.build_launchers; TACHYON_PREBUILD_LAUNCHERS=0 turns it off): host work only, no device
    allocation, so a later module load is quick without moving where it lands."""

    active: bool
    device: torch.device | None = None
    kernels: list[object] = field(default_factory=list)
    body_s: float = 0.0
    wait_s: float = 0.0
    loaded: int = 0
    load_s: float = 0.0
    launchers_built: int = 0
    launcher_s: float = 0.0

    def __bool__(self) -> bool:
        return self.active

    def load_modules(self, workers: int | None = None) -> int:
        """Load the modules of the pass's kernels not loaded yet, on a thread pool (kernels/module_loads.py);
        returns how many. Outside any CUDA-graph capture."""
        if not self.active or not self.kernels:
            return 0
        t0 = time.perf_counter()
        with _pool(self.device, workers) as pool:
            n = load_modules(self.kernels, pool)
        self.loaded += n
        self.load_s += time.perf_counter() - t0
        return n

    def summary(self) -> dict[str, float | int]:
        return dict(kernels=len(self.kernels), modules_loaded=self.loaded, body_s=self.body_s, wait_s=self.wait_s,
                    load_s=self.load_s, launchers_built=self.launchers_built, launcher_s=self.launcher_s)


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
    stats = CompilePass(True, device)
    compiled: dict[int, object] = {}  # each kernel (or its compile's future) once

    def run(self, *args, grid, warmup, **kwargs):  # compile (asynchronously) but never launch
        kernel = original(self, *args, grid=grid, warmup=True, **kwargs)
        if kernel is not None:
            compiled.setdefault(id(kernel), kernel)
        return kernel

    t0 = time.perf_counter()
    with _pool(device, workers) as pool:
        JITFunction.run = run
        try:
            with AsyncCompileMode(pool, ignore_errors=True):
                try:
                    yield stats
                finally:
                    t1 = time.perf_counter()
        finally:
            JITFunction.run = original
        # every future has finished here (AsyncCompileMode's exit): its result sits in .kernel
        finished = (getattr(k, "kernel", k) for k in compiled.values())
        stats.kernels = list({id(k): k for k in finished if k is not None}.values())
        t2 = time.perf_counter()
        if os.environ.get("TACHYON_PREBUILD_LAUNCHERS", "1") != "0":
            stats.launchers_built = build_launchers(stats.kernels, pool)
    stats.body_s, stats.wait_s, stats.launcher_s = t1 - t0, t2 - t1, time.perf_counter() - t2
