"""Capturing a step without an eager run first: the module-load guard, the preload after the compile pass, and
capture_step's fallback. The logic runs on CPU with stand-ins for Triton's kernel class and for CUDA capture; on a
GPU the real path is checked (a compiled and loaded kernel captures directly; a fresh specialisation falls back)."""

import pytest
import torch

from tachyon.engine import cuda_graph
from tachyon.kernels import module_loads
from tachyon.kernels.module_loads import NeedsEagerRun, load_modules, loads_raise_in_capture
from tests.kernel_env import CUDA, DEV, K


class FakeKernel:
    """Triton's CompiledKernel as the guard sees it: `module` is None until `_init_handles` loads it."""

    def __init__(self, name: str, fails: bool = False):
        self.name, self.module, self.fails, self.loads = name, None, fails, 0

    def _init_handles(self) -> None:
        if self.module is not None:
            return
        if self.fails:
            raise RuntimeError("out of resources: shared memory")
        self.loads += 1
        self.module = f"module-of-{self.name}"


class FakeFuture:  # a finished async compile: its kernel, or None after a failed compile
    def __init__(self, kernel):
        self.kernel = kernel


@pytest.fixture
def fake_triton(monkeypatch):
    capturing = {"on": False}
    monkeypatch.setattr(module_loads, "_compiled_kernel_class", lambda: FakeKernel)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: capturing["on"])
    return capturing


def test_load_modules_loads_each_kernel_once_and_skips_what_cannot_load(fake_triton):
    a, b, bad = FakeKernel("a"), FakeKernel("b"), FakeKernel("bad", fails=True)
    b._init_handles()
    assert load_modules([a, FakeFuture(a), b, bad, FakeFuture(None), object()]) == 1
    assert (a.loads, b.loads, a.module, bad.module) == (1, 1, "module-of-a", None)


def test_load_modules_on_a_thread_pool(fake_triton):
    from concurrent.futures import ThreadPoolExecutor

    ks = [FakeKernel(f"k{i}") for i in range(20)] + [FakeKernel("bad", fails=True)]
    with ThreadPoolExecutor(4) as pool:
        assert load_modules(ks + ks[:5], pool) == 20
    assert all(k.loads == 1 for k in ks[:20])


@pytest.mark.skipif(not K.HAS_TRITON, reason="needs Triton")
def test_build_launchers_builds_each_unloaded_kernels_launcher_once(fake_triton, monkeypatch):
    import importlib
    from concurrent.futures import ThreadPoolExecutor
    from types import SimpleNamespace

    triton_driver = importlib.import_module("triton.runtime.driver")  # the module (triton.runtime exports an object)
    built = []

    def launcher_cls(src, metadata):
        if src == "bad":
            raise RuntimeError("cc failed")
        built.append((src, metadata))

    monkeypatch.setattr(triton_driver, "driver", SimpleNamespace(active=SimpleNamespace(launcher_cls=launcher_cls)))
    ks = [FakeKernel(f"k{i}") for i in range(6)]
    for i, k in enumerate(ks):
        k.src, k.metadata = f"src{i}", {"i": i}
    ks[0]._init_handles()  # loaded: its launcher exists
    ks[5].src = "bad"
    with ThreadPoolExecutor(3) as pool:
        assert module_loads.build_launchers(ks + ks[1:3] + [object()], pool) == 4
    assert sorted(built) == [(f"src{i}", {"i": i}) for i in range(1, 5)]
    assert all(k.module is None for k in ks[1:])  # host work only: nothing loaded


def test_guard_raises_only_for_a_load_during_capture(fake_triton):
    loaded, fresh, other = FakeKernel("loaded"), FakeKernel("fresh"), FakeKernel("other")
    loaded._init_handles()
    original = FakeKernel._init_handles
    with loads_raise_in_capture():
        fake_triton["on"] = True
        loaded._init_handles()  # already loaded: nothing to do, no raise
        with pytest.raises(NeedsEagerRun, match="fresh"):
            fresh._init_handles()
        assert fresh.module is None and fresh.loads == 0  # raised before loading anything
        fake_triton["on"] = False
        other._init_handles()  # outside capture a load goes ahead
        assert other.module == "module-of-other"
    assert FakeKernel._init_handles is original  # the guard is removed on exit
    fake_triton["on"] = True
    fresh._init_handles()
    assert fresh.module == "module-of-fresh"


@pytest.fixture
def fake_capture(monkeypatch):
    """cuda_graph._capture stand-in: runs the step 'in capture' (the guard's condition on) and raises NeedsEagerRun
    where the step launches a kernel not yet loaded, as the real capture does."""
    attempts = []

    def capture(step, pool):
        attempts.append(pool)
        monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
        try:
            out = step()
        finally:
            monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
        return "graph", out, pool or "new-pool"

    monkeypatch.setattr(cuda_graph, "_capture", capture)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(module_loads, "_compiled_kernel_class", lambda: FakeKernel)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    monkeypatch.delenv("TACHYON_CAPTURE_EAGER_FIRST", raising=False)
    return attempts


def _eager_runs() -> int:
    return cuda_graph.CAPTURE_COUNTS["eager_runs"]


def test_capture_step_captures_directly_when_every_kernel_is_loaded(fake_capture):
    kernel, calls = FakeKernel("k"), []
    kernel._init_handles()

    def step():
        kernel._init_handles()
        calls.append(torch.is_grad_enabled())
        return len(calls)

    e0 = _eager_runs()
    g, out, pool = cuda_graph.capture_step(step, None)
    assert (g, out, pool) == ("graph", 1, "new-pool") and len(calls) == 1  # no eager run
    assert _eager_runs() == e0 and fake_capture == [None]  # one capture


def test_capture_step_runs_eagerly_and_recaptures_when_a_module_would_load(fake_capture):
    kernel, calls = FakeKernel("fresh"), []

    def step():
        calls.append("launch")
        kernel._init_handles()
        return kernel.module

    e0 = _eager_runs()
    g, out, pool = cuda_graph.capture_step(step, "shared-pool")
    # the first capture stopped at the load; the eager run loaded the module; the second capture succeeded
    assert calls == ["launch"] * 3 and out == "module-of-fresh" and kernel.loads == 1
    assert pool == "shared-pool" and fake_capture == ["shared-pool", "shared-pool"]
    assert _eager_runs() == e0 + 1


def test_capture_step_runs_eagerly_first_when_the_loads_cannot_be_guarded(fake_capture, monkeypatch):
    """A Triton whose kernel class the guard does not know: a direct capture could hit a module load CUDA forbids,
    so every capture runs its step eagerly first."""
    monkeypatch.setattr(module_loads, "_compiled_kernel_class", lambda: None)
    monkeypatch.setattr(module_loads, "HAS_TRITON", True)
    assert not module_loads.guard_available()
    calls = []
    e0 = _eager_runs()
    cuda_graph.capture_step(lambda: calls.append(1), None)
    assert len(calls) == 2 and _eager_runs() == e0 + 1 and len(fake_capture) == 1


def test_capture_step_eager_first_knob(fake_capture, monkeypatch):
    monkeypatch.setenv("TACHYON_CAPTURE_EAGER_FIRST", "1")
    calls = []
    e0 = _eager_runs()
    cuda_graph.capture_step(lambda: calls.append(1), None)
    assert len(calls) == 2 and _eager_runs() == e0 + 1 and len(fake_capture) == 1


def test_sync_counters_growth_in_capture_is_an_eager_run_need(monkeypatch):
    """A split-KV launch whose counter buffer must grow during capture raises NeedsEagerRun (what capture_step's
    fallback catches) before allocating anything."""
    from tachyon.kernels import _triton

    monkeypatch.setattr(_triton, "_COUNTERS", {})
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    with pytest.raises(NeedsEagerRun, match="sync counters"):
        _triton.sync_counters(torch.device("cuda", 0), 10_000)
    assert _triton._COUNTERS == {"cuda:0": []}


@pytest.mark.skipif(not CUDA or not K.HAS_TRITON, reason="needs a GPU and Triton")
def test_gpu_compiled_kernel_captures_without_eager_run_and_fresh_one_falls_back():
    """On the GPU: a launch compiled by compile_only, its module then loaded, captures with no eager run and replays
    what the reference writes; a specialisation never launched raises NeedsEagerRun in the guarded capture, and
    capture_step then runs it eagerly and captures a graph that is just as correct."""
    from tachyon.kernels.precompile import compile_only

    def case(H: int, D: int):
        T = 7
        k, v = torch.randn(T, H, D, device=DEV), torch.randn(T, H, D, device=DEV)
        cache = torch.zeros(2, 4, 16, H, D, device=DEV)
        slots = torch.tensor([0, 17, -1, 40, 63, 5, 33], device=DEV)
        ref = torch.zeros_like(cache)
        K.store_kv_ref(k, v, ref, slots)
        return k, v, cache, slots, ref

    k, v, cache, slots, ref = case(5, 48)  # head shapes no other test launches: fresh specialisations
    with compile_only(torch.device(DEV)) as compiling:
        assert compiling
        K.store_kv_triton(k, v, cache, slots)
    assert compiling.launchers_built >= 1, "the pass did not prebuild the fresh kernel's launcher (the default)"
    assert compiling.kernels and compiling.load_modules() >= 1
    e0 = _eager_runs()
    g, _, _ = cuda_graph.capture_step(lambda: K.store_kv_triton(k, v, cache, slots), None)
    assert _eager_runs() == e0, "a kernel the compile pass loaded needed an eager run"
    assert not cache.any(), "capture ran the kernel"
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(cache, ref)

    k, v, cache, slots, ref = case(7, 24)
    with pytest.raises(NeedsEagerRun):
        with loads_raise_in_capture():
            cuda_graph._capture(lambda: K.store_kv_triton(k, v, cache, slots), None)
    torch.cuda.synchronize()
    g, _, _ = cuda_graph.capture_step(lambda: K.store_kv_triton(k, v, cache, slots), None)
    assert _eager_runs() == e0 + 1
    cache.zero_()
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(cache, ref)
