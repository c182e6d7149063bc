"""LateCompileWatch (kernels/late_compiles.py): counts Triton's in-memory cache misses after arming, through the
hooks Triton itself calls. The hooks are driven here by Triton's own `JITFunction._call_hook` (which builds the
keyword arguments a real launch passes), so a change in Triton's hook contract shows; no GPU is needed."""

from __future__ import annotations

import logging

import pytest

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

from tachyon.kernels import late_compiles  # noqa: E402
from tachyon.kernels.late_compiles import LateCompileWatch, log_late_compile  # noqa: E402


def _probe_body(x_ptr, n, BLOCK: tl.constexpr):
    pass


# a compiled-mode JITFunction even under TRITON_INTERPRET=1 (where @triton.jit gives an interpreted function)
_probe_kernel = triton.runtime.jit.JITFunction(_probe_body)


def _runtime():
    knobs = pytest.importorskip("triton.knobs")
    if not hasattr(knobs.runtime, "jit_cache_hook"):
        pytest.skip("this Triton has no runtime hooks")
    return knobs.runtime


def _options():
    try:
        from triton.backends.nvidia.compiler import CUDAOptions
    except ImportError:
        pytest.skip("no CUDA backend in this Triton")
    return CUDAOptions()


@pytest.fixture()
def hooks(monkeypatch):
    """A fresh install of the watch's hooks over a previous hook pair that records its calls and, like a hook that
    serves kernels from elsewhere, answers True (skip the compile); restored afterwards."""
    runtime = _runtime()
    seen = []

    def prev_cache(**kw):
        seen.append(("cache", kw["key"]))
        return True

    def prev_post(**kw):
        seen.append(("post", kw["key"]))

    monkeypatch.setattr(runtime, "jit_cache_hook", prev_cache)
    monkeypatch.setattr(runtime, "jit_post_compile_hook", prev_post)
    monkeypatch.setattr(late_compiles, "_installed", False)
    monkeypatch.setattr(late_compiles, "_previous", {})
    monkeypatch.setattr(late_compiles, "_watches", late_compiles.weakref.WeakSet())
    return runtime, seen


def _launch_miss(runtime, n_type: str = "i32", warmup: bool = False) -> tuple[object, object]:
    """What Triton does on a cache miss: the cache hook, a compile (skipped here), the post-compile hook."""
    from triton.backends.compiler import GPUTarget

    opts = _options()
    key = (("*fp32", n_type), str(opts))
    sig = {"x_ptr": "*fp32", "n": n_type, "BLOCK": "constexpr"}
    args = (key, sig, GPUTarget("cuda", 90, 32), 0, {(2,): 128}, opts, [{}], warmup)
    skip = _probe_kernel._call_hook(runtime.jit_cache_hook, *args)
    _probe_kernel._call_hook(runtime.jit_post_compile_hook, *args)
    return key, skip


def test_counts_a_miss_with_kernel_and_specialisation(hooks):
    runtime, seen = hooks
    got = []
    watch = LateCompileWatch(got.append)
    assert watch.arm() and watch.armed
    key, skip = _launch_miss(runtime)
    assert watch.count == 1 and len(watch.events) == 1
    ev = watch.events[0]
    assert ev.kernel.endswith("._probe_body")
    assert "num_warps=" in ev.specialization and "x_ptr" in ev.specialization
    assert ev.seconds is not None and ev.seconds >= 0.0
    assert got == [ev]
    # the previous hooks still run, and the previous cache hook's answer is Triton's answer
    assert seen == [("cache", key), ("post", key)] and skip is True


def test_each_specialisation_counts_and_disarm_stops(hooks):
    runtime, _ = hooks
    watch = LateCompileWatch()
    other = LateCompileWatch()
    watch.arm()
    _launch_miss(runtime, "i32")
    other.arm()
    _launch_miss(runtime, "i64")
    assert watch.count == 2 and other.count == 1
    watch.disarm()
    _launch_miss(runtime, "i32")
    assert watch.count == 2 and other.count == 2 and not watch.armed


def test_manual_warmup_is_not_late(hooks):
    runtime, _ = hooks
    watch = LateCompileWatch()
    watch.arm()
    _launch_miss(runtime, warmup=True)
    assert watch.count == 0


def test_unarmed_watch_sees_nothing(hooks):
    runtime, _ = hooks
    watch = LateCompileWatch()
    _launch_miss(runtime)
    assert watch.count == 0 and watch.events == []


def test_events_kept_are_bounded_but_count_goes_on(hooks, monkeypatch):
    runtime, _ = hooks
    monkeypatch.setattr(late_compiles, "_MAX_KEPT", 2)
    watch = LateCompileWatch()
    watch.arm()
    for t in ("i32", "i64", "i1"):
        _launch_miss(runtime, t)
    assert watch.count == 3 and len(watch.events) == 2 and watch.seconds() >= 0.0


def test_log_line_names_kernel_and_specialisation(hooks, caplog):
    runtime, _ = hooks
    watch = LateCompileWatch(log_late_compile)
    watch.arm()
    with caplog.at_level(logging.WARNING, logger="tachyon.kernels.late_compiles"):
        _launch_miss(runtime)
    assert len(caplog.records) == 1
    msg = caplog.records[0].getMessage()
    assert "_probe_body" in msg and "after start-up" in msg and "num_warps=" in msg


def test_cpu_engine_reports_zero(tiny_llama):
    """The engine arms its watch on CUDA only; on the CPU its stats carry the field at 0."""
    from tachyon import LLM

    llm = LLM(tiny_llama, device="cpu")
    assert not llm.engine.late_compiles.armed
    assert llm.engine.stats().late_kernel_compiles == 0


def test_an_engine_starting_up_is_not_late(hooks):
    """A second engine's start-up (a multi-model server builds them one after another) does not count as late for
    the first's watch; counting resumes when it ends."""
    runtime, _ = hooks
    watch = LateCompileWatch()
    watch.arm()
    with late_compiles.engine_starting():
        with late_compiles.engine_starting():
            _launch_miss(runtime, "i32")
        _launch_miss(runtime, "i64")
    assert watch.count == 0
    _launch_miss(runtime, "i1")
    assert watch.count == 1
