"""Which cuBLAS library torch's GEMMs go through: cuBLAS (torch's default) or cuBLASLt, whose heuristics pick
other kernels for some decode-step shapes (H200, Qwen2.5-7B down projection at 64-160 rows: 37-43 us against
43-47, no split-K pass; at 192 rows 78.6 against 51.2: benchmarks/results/session13/cub13_eda5ca3/). Which one a
weight uses at a row count is decided per shape at warm-up (gemv_select.pick_blas)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F

CUBLASLT = ("cublaslt",)  # the choice pick_blas returns (None: the default library)


@contextmanager
def blas_library(name: str) -> Iterator[None]:
    """torch's GEMMs inside go through `name` ("cublas" / "cublaslt"); the previous choice is restored after.
    Host-side state read when a GEMM is issued: a CUDA graph keeps the kernel chosen at capture."""
    prev = torch.backends.cuda.preferred_blas_library()
    torch.backends.cuda.preferred_blas_library(name)
    try:
        yield
    finally:
        torch.backends.cuda.preferred_blas_library(prev)


def linear_lt(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """F.linear(x, w, bias) through cuBLASLt (CUDA; elsewhere the library choice changes nothing)."""
    if not x.is_cuda:
        return F.linear(x, w, bias)
    with blas_library("cublaslt"):
        return F.linear(x, w, bias)
