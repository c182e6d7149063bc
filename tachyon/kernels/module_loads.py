"""Triton module loads and CUDA-graph capture.

A compiled Triton kernel loads its CUDA module (cuModuleLoadData) at its first launch, and CUDA forbids that while
a stream is being captured. A step can therefore be captured without running it eagerly first only if every
kernel it launches is already loaded.

`load_modules(kernels)` loads the modules of compiled kernels now (call it outside any capture);
`build_launchers(kernels)` builds only their host launchers (no device work).
`loads_raise_in_capture()` is a context in which a launch that would load a module while the current stream
captures raises `NeedsEagerRun` instead, before any CUDA call, so the caller can end that capture, discard it,
run the step once eagerly and capture again. Without Triton both are no-ops; `guard_available()` says whether the
guard works with the installed Triton.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from concurrent.futures import Executor
from contextlib import contextmanager

import torch

from tachyon.kernels._triton import HAS_TRITON, NeedsEagerRun


def _compiled_kernel_class():
    if not HAS_TRITON:
        return None
    try:
        from triton.compiler.compiler import CompiledKernel
    except ImportError:  # pragma: no cover - a triton without this layout: captures always run eagerly first
        return None
    return CompiledKernel if hasattr(CompiledKernel, "_init_handles") else None


def guard_available() -> bool:
    """Whether a capture can skip its eager run: loads_raise_in_capture can guard this Triton's module loads (or
    there is no Triton, so nothing loads). False for a Triton whose kernel class this module does not know."""
    return not HAS_TRITON or _compiled_kernel_class() is not None


def _on_unloaded(kernels: Iterable[object], action, pool: Executor | None) -> int:
    """Run `action(kernel)` once for each distinct compiled kernel (a triton CompiledKernel, or a finished
    async-compile future of one) whose module is not loaded, on `pool`'s threads if given; returns how many
    succeeded. A failure is skipped: the kernel's own launch raises it again."""
    cls = _compiled_kernel_class()
    if cls is None:
        return 0
    todo = {}
    for k in kernels:
        k = k if isinstance(k, cls) else getattr(k, "kernel", None)  # a FutureKernel holds its result in .kernel
        if isinstance(k, cls) and getattr(k, "module", None) is None:
            todo[id(k)] = k

    def attempt(k) -> bool:
        try:
            action(k)
        except Exception:  # noqa: BLE001 - surfaced by the kernel's own launch
            return False
        return True

    work = list(todo.values())
    return sum(pool.map(attempt, work) if pool is not None else map(attempt, work))


def load_modules(kernels: Iterable[object], pool: Executor | None = None) -> int:
    """Load the CUDA module of each compiled kernel not loaded yet (e.g. one with too much shared memory fails
    and is skipped), on `pool`'s threads if given, each with the kernels' device current; returns how many were
    loaded here."""
    return _on_unloaded(kernels, lambda k: k._init_handles(), pool)


def build_launchers(kernels: Iterable[object], pool: Executor | None = None) -> int:
    """Build, and discard, the host launcher of each compiled kernel whose module is not loaded yet, on `pool`'s
    threads if given; returns how many were built. Triton versions that generate a C launcher per kernel
    signature compile it with the system C compiler into Triton's cache (a fraction of a second each on a slow
    host), so the kernel's later first launch finds it built. Host work only: no CUDA call, no device memory."""
    if _compiled_kernel_class() is None:
        return 0
    from triton.runtime.driver import driver

    return _on_unloaded(kernels, lambda k: driver.active.launcher_cls(k.src, k.metadata), pool)


@contextmanager
def loads_raise_in_capture() -> Iterator[None]:
    """While active, a Triton kernel launch that would load its module during stream capture raises NeedsEagerRun
    (see the module docstring). Launches outside capture load as usual."""
    cls = _compiled_kernel_class()
    if cls is None:
        yield
        return
    original = cls._init_handles

    def guarded(self) -> None:
        if getattr(self, "module", None) is None and torch.cuda.is_current_stream_capturing():
            raise NeedsEagerRun(f"Triton kernel {self.name} would load its module during CUDA-graph capture")
        original(self)

    cls._init_handles = guarded
    try:
        yield
    finally:
        cls._init_handles = original
