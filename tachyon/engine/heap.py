"""The Python heap of a process that owns engines: frozen once they are up, so that the cyclic garbage collector's
later passes skip the start-up objects (weights' wrappers, the tokenizer, graph and kernel caches).

Why: on an H200 host, the first batch-1 run after start-up paid 2.2-2.4 ms of collections (a 1.1-ms middle
collection among them), the steady runs 0.3-0.5 ms (benchmarks/results/session15/); the serving start-up heap's
full collection takes 127 ms on 2 cores (benchmarks/gc_serving_probe.py). vLLM and SGLang freeze after start-up too.

Only the process's owner calls these (`tachyon serve` once its models are loaded, the bench's Tachyon backend around
its runs), never the library on its own: frozen objects are still freed by reference counting, but a reference
cycle among them is kept until `unfreeze_heap`.
"""

from __future__ import annotations

import gc


def freeze_heap() -> int:
    """Collect the garbage there is, then move every surviving tracked object into the collector's permanent
    generation (`gc.freeze`). Returns how many objects are frozen now."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def unfreeze_heap() -> None:
    """Give the frozen objects back to the collector (its oldest generation), e.g. before dropping an engine so
    that cycles among its objects can be collected."""
    gc.unfreeze()
