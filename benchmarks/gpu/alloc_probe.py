"""Does torch's runtime allocator-settings call take effect on this torch? Prints the settings calls torch has,
turns on expandable segments through the first one (unless PYTORCH_CUDA_ALLOC_CONF / PYTORCH_ALLOC_CONF is set, as
the engine did at 7e48ea0-0a44030) and reports from torch's memory snapshot whether the segments made afterwards (an
ordinary block and a CUDA graph's private pool) are expandable.

Usage (GPU): python benchmarks/gpu/alloc_probe.py
"""

from __future__ import annotations

import os

import torch

ALLOC_CONF_VARS = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")
SETTERS = ("_accelerator_setAllocatorSettings", "_cuda_cudaCachingAllocator_set_allocator_settings")


def segments() -> list[tuple[str, int, bool | None]]:
    return [(hex(s["address"]), s["total_size"], s.get("is_expandable")) for s in torch.cuda.memory_snapshot()]


def main() -> None:
    print("torch", torch.__version__, "env", {v: os.environ.get(v) for v in ALLOC_CONF_VARS})
    print("settings calls:", [n for n in dir(torch._C) if "llocator" in n and "etting" in n])
    setter = next((getattr(torch._C, n) for n in SETTERS if hasattr(torch._C, n)), None)
    print("picked:", getattr(setter, "__name__", None))
    if setter is not None and not any(os.environ.get(v) for v in ALLOC_CONF_VARS):
        setter("expandable_segments:True")
        print("set expandable_segments:True at run time")
    x = torch.empty(1 << 20, device="cuda")
    print("after a 4 MiB tensor:", segments())
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        with torch.cuda.graph(g):
            y = x * 2
    torch.cuda.synchronize()
    print("after a graph capture:", segments(), "out", hex(y.data_ptr()))


if __name__ == "__main__":
    main()
