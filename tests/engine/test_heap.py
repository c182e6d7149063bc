"""engine.heap: what a frozen heap keeps and gives back (oracle: weak references and gc's own generations)."""

import gc
import weakref

import pytest

from tachyon.engine.heap import freeze_heap, unfreeze_heap


class _Node:
    pass


def test_freeze_keeps_cycles_until_unfreeze_and_collects_garbage_first():
    garbage = _Node()
    garbage.me = garbage
    garbage_ref = weakref.ref(garbage)
    del garbage  # unreachable before the freeze: collected by it, not frozen
    kept = _Node()
    kept.me = kept
    kept_ref = weakref.ref(kept)
    try:
        frozen = freeze_heap()
        assert garbage_ref() is None
        # frozen objects freed by reference counting since (another thread's temporaries) leave the count
        assert 0 < gc.get_freeze_count() <= frozen
        assert not any(o is kept for o in gc.get_objects())
        del kept  # a cycle among frozen objects: no collection reaches it
        gc.collect()
        assert kept_ref() is not None
    finally:
        unfreeze_heap()
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert kept_ref() is None


def test_frozen_objects_are_still_freed_by_reference_counting():
    obj = _Node()
    ref = weakref.ref(obj)
    try:
        freeze_heap()
        del obj
        assert ref() is None
    finally:
        unfreeze_heap()


def test_a_frozen_process_exits_without_nanobind_leak_reports():
    """A process that froze its heap (as `tachyon serve` does) unfreezes it at exit, so Triton's nanobind types are
    collected and no "leaked" report lands on stderr at every shutdown."""
    import subprocess
    import sys

    pytest.importorskip("triton")
    code = "import triton.language; from tachyon.engine.heap import freeze_heap; freeze_heap()"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "nanobind" not in out.stderr, out.stderr[-2000:]
