"""Probe for stop 19's open question: does using cuBLASLt once, outside any CUDA graph and before the engine is
built, slow the engine's batch-1 decode (Qwen3-0.6B bs1 lost 2% with the since-reverted cuBLASLt picks, though no
batch-1 GEMM took cuBLASLt)? With LT_TOUCH=1 one bf16 GEMM goes through cuBLASLt and the library choice is set
back to cuBLAS; then the `tachyon` CLI runs with the remaining arguments, in the same process.

Usage (GPU): LT_TOUCH=1 python benchmarks/gpu/lt_touch.py bench offline --backend tachyon --model qwen3-0.6b
             --dummy --workload bs1 --output out.json
"""

import os
import sys

import torch

from tachyon.cli import main


def touch_cublaslt() -> None:
    """One GEMM through cuBLASLt (its handle and workspace come into being here), then cuBLAS again."""
    torch.backends.cuda.preferred_blas_library("cublaslt")
    x = torch.randn(64, 1024, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(3072, 1024, device="cuda", dtype=torch.bfloat16)
    torch.nn.functional.linear(x, w)
    torch.cuda.synchronize()
    torch.backends.cuda.preferred_blas_library("cublas")


if __name__ == "__main__":
    if os.environ.get("LT_TOUCH") == "1":
        touch_cublaslt()
    sys.exit(main(sys.argv[1:]))
