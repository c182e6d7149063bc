"""Optional Triton import shared by the kernel modules.

`HAS_TRITON` is False when Triton is missing; `triton.jit` then leaves functions undecorated and
`tl.constexpr` is a plain annotation, so every module still imports and its reference still works.
With a CPU-only torch build, Triton can only run under its interpreter, so TRITON_INTERPRET=1 is
set (unless already set) before Triton is imported: Triton reads it when it decorates a function,
its own library included. The dispatcher never sends CPU tensors to Triton; tests call the
`*_triton` functions directly.
"""

import os
from types import SimpleNamespace

import torch

if torch.version.cuda is None and getattr(torch.version, "hip", None) is None:
    os.environ.setdefault("TRITON_INTERPRET", "1")

try:
    import triton
    import triton.language as tl

    HAS_TRITON = True
except ImportError:  # pragma: no cover - exercised only without triton
    HAS_TRITON = False
    triton = SimpleNamespace(jit=lambda fn=None, **_: fn if fn is not None else (lambda f: f))
    tl = SimpleNamespace(constexpr=int)


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


def require_triton() -> None:
    if not HAS_TRITON:
        raise RuntimeError("Triton is not installed; use the *_ref kernels")


__all__ = ["HAS_TRITON", "triton", "tl", "next_pow2", "require_triton", "sm_count"]
