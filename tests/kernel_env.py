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
