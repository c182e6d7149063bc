"""Does the engine's allocator call take effect on this torch? Prints the settings calls torch has, which one
tachyon.engine.allocator picks, what it returned, and whether the segments made afterwards (an ordinary block and
a CUDA graph's private pool) are expandable, from torch's memory snapshot.

Usage (GPU): python benchmarks/gpu/alloc_probe.py
"""

from __future__ import annotations

import os

import torch

from tachyon.engine import allocator


def segments() -> list[tuple[str, int, bool | None]]:
    return [(hex(s["address"]), s["total_size"], s.get("is_expandable")) for s in torch.cuda.memory_snapshot()]


def main() -> None:
    print("torch", torch.__version__, "env", {v: os.environ.get(v) for v in allocator.ALLOC_CONF_VARS})
    print("settings calls:", [n for n in dir(torch._C) if "llocator" in n and "etting" in n])
    print("picked:", getattr(allocator._setter(), "__name__", None))
    print("use_expandable_segments:", allocator.use_expandable_segments(torch.device("cuda")))
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
