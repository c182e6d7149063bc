"""Optional Triton import shared by the kernel modules.

`HAS_TRITON` is False when Triton is missing; `triton.jit` then leaves functions undecorated and
`tl.constexpr` is a plain annotation, so every module still imports and its reference still works.
Without a usable GPU (a CPU-only torch build, or a CUDA build on a machine without one: Triton then
finds no active driver), Triton can only run under its interpreter, so TRITON_INTERPRET=1 is
set (unless already set) before Triton is imported: Triton reads it when it decorates a function,
its own library included. The dispatcher never sends CPU tensors to Triton; tests call the
`*_triton` functions directly.
"""

import os
from types import SimpleNamespace

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

try:
    import triton
    import triton.language as tl

    HAS_TRITON = True
except ImportError:  # pragma: no cover - exercised only without triton
    HAS_TRITON = False
    triton = SimpleNamespace(jit=lambda fn=None, **_: fn if fn is not None else (lambda f: f))
    tl = SimpleNamespace(constexpr=int)

try:  # grid dependency control (programmatic dependent launch, sm_90+), triton >= 3.3
    from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

    HAS_GDC = True
except ImportError:  # pragma: no cover - older triton: kernels launch without PDL
    HAS_GDC = False
    gdc_launch_dependents = gdc_wait = None


def use_triton(t: torch.Tensor) -> bool:
    """True when `t` lives on a CUDA device, Triton is importable and the reference is not forced."""
    return t.is_cuda and HAS_TRITON and os.environ.get("TACHYON_FORCE_REF", "0") != "1"


def next_pow2(n: int) -> int:
    """Smallest power of two >= n (and >= 1)."""
    return 1 << max(0, int(n) - 1).bit_length()


_SM_COUNT: dict[int, int] = {}


def sm_count(device: torch.device) -> int:
    """Multiprocessors of a CUDA device (cached); 132 (an H100/H200) for other devices."""
    if device.type != "cuda":
        return 132
    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _SM_COUNT:
        _SM_COUNT[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
    return _SM_COUNT[idx]


_PDL_CAPABLE: dict[int, bool] = {}


def pdl_args(device: torch.device, allowed: bool = True) -> dict:
    """Launch arguments for a kernel taking a `PDL: tl.constexpr`: programmatic dependent launch on
    sm_90+ GPUs (the kernel may start while its predecessor in the stream finishes; it calls pdl_wait
    before reading anything a predecessor writes, and writes nothing before that), unless the caller's
    launch policy says not (`allowed` False, e.g. attention_config.attention_pdl) or TACHYON_PDL=0 (read at
    every launch: a CUDA graph keeps what was in force at capture). CPU (the interpreter) never uses it."""
    if not allowed or device.type != "cuda" or not HAS_GDC or os.environ.get("TACHYON_PDL", "1") == "0":
        return {"PDL": False}
    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _PDL_CAPABLE:
        _PDL_CAPABLE[idx] = torch.cuda.get_device_capability(idx)[0] >= 9
    on = _PDL_CAPABLE[idx]
    return {"PDL": True, "launch_pdl": True} if on else {"PDL": False}


@triton.jit
def pdl_trigger(PDL: tl.constexpr):
    """Let the next kernel in the stream launch once every program of this one has started (no-op
    unless PDL). Safe at a program's start: the dependent waits (pdl_wait) for this kernel's end."""
    if PDL:
        gdc_launch_dependents()


@triton.jit
def pdl_wait(PDL: tl.constexpr):
    """Block until the previous kernel in the stream has finished and its writes are visible (no-op
    unless PDL). Before it a program may only read what no kernel of the running step writes, and store
    nothing: weights and constant tables, step inputs copied from the host before the step (seq_lens,
    positions, slot_mapping, block tables, query_start_loc), and KV-cache entries of earlier steps (keys
    before a decode token's own position). Under PDL a chain of kernels that trigger early can be running
    concurrently, so anything an earlier kernel of the step writes must be read after the wait."""
    if PDL:
        gdc_wait()


class NeedsEagerRun(RuntimeError):
    """Raised during CUDA-graph capture by a launch that needs the step to run eagerly first (a Triton module still
    to load, a buffer still to grow); the capture is to be discarded and retried after one eager run."""


# zeroed int32 counters for "last program to finish" merges (split-KV attention, split-K GEMMs), per device.
# Every kernel that uses them leaves them zero, touches them only after its pdl_wait, and the kernels of a
# stream run one after another, so all share one buffer. Never freed (CUDA graphs bake in the address):
# a larger need allocates a new buffer and keeps the old one.
_COUNTERS: dict[str, list[torch.Tensor]] = {}


def sync_counters(device: torch.device, n: int) -> torch.Tensor:
    """At least n zeroed int32 counters on `device`. Allocated outside CUDA-graph capture (a shape's first
    launch runs eagerly before it is captured; capture raises if a larger buffer is still needed)."""
    bufs = _COUNTERS.setdefault(str(device), [])
    if not bufs or bufs[-1].numel() < n:
        if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
            raise NeedsEagerRun(f"sync counters: {n} needed during CUDA-graph capture; launch the shape eagerly first")
        bufs.append(torch.zeros(max(n, 4096), dtype=torch.int32, device=device))
    return bufs[-1]


def require_triton() -> None:
    if not HAS_TRITON:
        raise RuntimeError("Triton is not installed; use the *_ref kernels")


__all__ = ["HAS_TRITON", "NeedsEagerRun", "triton", "tl", "next_pow2", "pdl_args", "pdl_trigger", "pdl_wait",
           "require_triton", "sm_count", "sync_counters"]
