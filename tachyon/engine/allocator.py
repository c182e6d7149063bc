"""The CUDA caching allocator's mode for an engine process.

Expandable segments (one growing virtual mapping per pool instead of a new cudaMalloc segment per growth) keep the
engine's buffers in a layout that does not depend on what was allocated before them. Under the default allocator,
Qwen3-0.6B's batch-1 decode runs in one of two modes for a whole process, 0.655 or 0.668 ms a step, set by where the
start-up's blocks landed (a 256 KiB block held anywhere in the start-up gives the slow one); with expandable
segments every build ran at 0.6544-0.6548 ms (H200, benchmarks/results/session17/README.md).
"""

from __future__ import annotations

import logging
import os

import torch

log = logging.getLogger("tachyon.engine")

# torch reads either name; a user who set one has chosen the allocator's mode, and we leave it alone
ALLOC_CONF_VARS = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")


def _setter():
    """torch's runtime allocator-settings call (private; renamed in 2.9), or None on a build without one."""
    fn = getattr(torch._C, "_accelerator_setAllocatorSettings", None)
    if fn is None:
        fn = getattr(torch._C, "_cuda_cudaCachingAllocator_set_allocator_settings", None)
    return fn


def use_expandable_segments(device: torch.device) -> bool:
    """Turn on expandable segments for this process's CUDA allocator; return whether this call set them.

    Does nothing (returns False) off CUDA, when the user set PYTORCH_CUDA_ALLOC_CONF / PYTORCH_ALLOC_CONF, or when
    torch has no runtime setter. The setting is process-wide and applies to segments created after the call: call
    it before the engine allocates (tensors that already exist keep their segments and stay valid).
    """
    if device.type != "cuda":
        return False
    chosen = [v for v in ALLOC_CONF_VARS if os.environ.get(v)]
    if chosen:
        log.info("allocator: %s=%r is set; expandable segments left as it says", chosen[0], os.environ[chosen[0]])
        return False
    setter = _setter()
    if setter is None:
        log.warning("allocator: this torch build has no runtime allocator setting; expandable segments stay off")
        return False
    setter("expandable_segments:True")
    return True
