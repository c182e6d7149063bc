"""The Python heap of a process that owns engines: frozen once they are up, so that the cyclic garbage collector's
later passes skip the start-up objects (weights' wrappers, the tokenizer, graph and kernel caches).

Why: a full collection of a serving process's start-up heap takes 127-128 ms on 2 cores
(benchmarks/gc_serving_probe.py), and a long-lived server makes one sooner or later; freezing bounds it to the
objects made since. vLLM and SGLang freeze after start-up too. Measured effect on H200 Qwen3-0.6B bs1: none (frozen
against unfrozen, every run 170.09-170.49 ms: benchmarks/results/session15/heap15_b367028/).

Only the process's owner calls these (`tachyon serve` once its models are loaded, the bench's Tachyon backend around
its runs), never the library on its own: frozen objects are still freed by reference counting, but a reference
cycle among them is kept until `unfreeze_heap`.
"""

from __future__ import annotations

import atexit
import gc


def freeze_heap() -> int:
    """Collect the garbage there is, then move every surviving tracked object into the collector's permanent
    generation (`gc.freeze`). Returns how many objects are frozen now. The heap is unfrozen at interpreter exit:
    frozen objects are never collected, and Triton's nanobind bindings then print a ~30-line "leaked" report on
    every shutdown."""
    gc.collect()
    gc.freeze()
    atexit.unregister(unfreeze_heap)  # registered once, however often the heap is frozen
    atexit.register(unfreeze_heap)
    return gc.get_freeze_count()


def unfreeze_heap() -> None:
    """Give the frozen objects back to the collector (its oldest generation), e.g. before dropping an engine so
    that cycles among its objects can be collected."""
    gc.unfreeze()
