"""Shared set-up of the kernel tests: Triton runs under its interpreter on CPU (the variable must be set
before triton's first import: Triton reads it when it decorates a function, its own library included;
tachyon.kernels also sets it on CPU-only torch builds), the device, dtypes and tolerances."""

import importlib
import os

import pytest
import torch

CUDA = torch.cuda.is_available()
if not CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")

K = importlib.import_module("tachyon.kernels")


def interpreter_usable() -> bool:
    """On CPU the whole of Triton must have been decorated under the interpreter."""
    if CUDA or not K.HAS_TRITON:
        return K.HAS_TRITON
    import triton.language as tl

    return type(tl.cdiv).__name__ == "InterpretedFunction"


DEV = "cuda" if CUDA else "cpu"
DTYPES = [torch.float32, torch.bfloat16] if CUDA else [torch.float32]
NAN = float("nan")
needs_triton = pytest.mark.skipif(
    not interpreter_usable(), reason="triton is not installed, or was imported before TRITON_INTERPRET=1"
)


def tol(dtype: torch.dtype) -> dict:
    return {"rtol": 1e-4, "atol": 1e-4} if dtype == torch.float32 else {"rtol": 1e-2, "atol": 1e-2}


def close(a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype) -> None:
    assert not torch.isnan(a).any(), "NaN (unwritten or bad) elements"
    torch.testing.assert_close(a.float(), b.float(), **tol(dtype))


# how split-KV decode partials are merged: the merge kernel after every split wrote its partial ("kernel"),
# the same after empty splits exit early ("early"), or by the last split program itself, after empty
# splits exit early ("inline") or with them counting in ("inline_wait")
MERGE_MODES = ["kernel", "early", "inline", "inline_wait"]


def set_merge_mode(monkeypatch, mode: str) -> None:
    monkeypatch.setenv("TACHYON_DECODE_EARLY_EXIT", "1" if mode in ("early", "inline") else "0")
    monkeypatch.setenv("TACHYON_DECODE_MERGE", "inline" if mode.startswith("inline") else "kernel")


def assert_counters_zero() -> None:
    """The inline merges' counters are back to zero after every launch (a CUDA graph replays on them)."""
    base = importlib.import_module("tachyon.kernels._triton")
    for bufs in base._COUNTERS.values():
        for buf in bufs:
            assert int(buf.abs().sum()) == 0, "inline-merge counters left non-zero"
