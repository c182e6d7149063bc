"""DRAM bytes the Qwen2.5-7B projections' cuBLAS GEMMs read at given row counts (decode batches, prefill chunks),
against the least they must read (run under Nsight Compute).

Runs each projection (qkv, o, gate_up, down, lm_head) as `x @ W.T` in bf16, one launch per (shape, rows) after a
warm-up and an L2 flush, between NVTX ranges named `<proj>_M<rows>`; `ncu --nvtx --nvtx-include` or the kernel
order attributes the counters (session19's table used the order: warm-up GEMM, flush, timed GEMM). If cuBLAS
re-reads an operand per tile instead of once from L2, DRAM bytes exceed weight + input bytes.

Usage (device): ncu --clock-control none --metrics dram__bytes_read.sum,gpu__time_duration.sum --csv \\
    python3 benchmarks/gpu/gemm_dram_probe.py --rows 96,256 > out.csv
"""

from __future__ import annotations

import argparse

import torch

PROJ = {"qkv": (3584, 4608), "o": (3584, 3584), "gate_up": (3584, 37888), "down": (18944, 3584),
        "lm_head": (3584, 152064)}  # name: (K, N)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default="96,256")
    args = ap.parse_args()
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(0)
    weights = {n: torch.randn(nn, k, device=dev, dtype=torch.bfloat16, generator=g) * 0.02
               for n, (k, nn) in PROJ.items()}
    flush = torch.empty(256 << 20, dtype=torch.uint8, device=dev)  # 256 MiB: evicts L2 (50 MB) between launches
    for m in (int(r) for r in args.rows.split(",")):
        for name, (k, _) in PROJ.items():
            x = torch.randn(m, k, device=dev, dtype=torch.bfloat16, generator=g)
            torch.matmul(x, weights[name].T)  # warm-up: cuBLAS handle, heuristics
            flush.zero_()
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_push(f"{name}_M{m}")
            torch.matmul(x, weights[name].T)
            torch.cuda.nvtx.range_pop()
            torch.cuda.synchronize()
            print(f"{name}_M{m}: weight bytes {weights[name].numel() * 2}", flush=True)


if __name__ == "__main__":
    main()
