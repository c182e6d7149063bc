"""How much the data itself moves a bf16 GEMM's speed and power on this GPU (a power-capped board runs
high-toggle data at lower clocks). Each (shape, data) pair runs back to back for --seconds; reports TFLOP/s,
mean board power and SM clock (NVML, sampled on a thread).

Data schemes (weights W, activations X):
  normal   W ~ N(0, 0.02), X ~ N(0, 1)          (our dummy init; activations after an RMSNorm)
  uniform  W ~ U(-1e-3, 1e-3), X ~ U(-1e-3, 1e-3)  (vLLM's dummy init everywhere)
  zeros    W = X = 0                              (no toggling: the board's low end)

`--chunks 1,8` instead runs each shape as the engine does (`F.linear`: weight N x K), its N split into C weights and
C outputs of N / C columns run back to back: with a chunk's weight small enough to stay in L2, the GEMM reads its
operands from DRAM fewer times (Nsight Compute: the one-piece 8,192-row gate_up reads 7.8x its operands), so the
pair says what those DRAM re-reads cost at the power cap.

Usage (GPU machine, repo root, PYTHONPATH=$PWD as bench_scripts/env.sh sets):
  python3 benchmarks/gpu/data_power.py --out $OUT/data_power.json
  python3 benchmarks/gpu/data_power.py --shapes prefill_gate_up --data normal --chunks 1,8 --out $OUT/chunks.json
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from clock_sampler import ClockSampler  # same folder (the script folder is on sys.path)

SHAPES = {  # name: (M, K, N)
    "square8192": (8192, 8192, 8192),
    "prefill_gate_up": (8192, 3584, 37888),
    "prefill_down": (8192, 18944, 3584),
    "decode256_gate_up": (256, 3584, 37888),
    "decode256_down": (256, 18944, 3584),
}


def make(scheme: str, shape: tuple[int, int], std: float, dev: str) -> torch.Tensor:
    if scheme == "normal":
        return torch.randn(shape, device=dev, dtype=torch.bfloat16) * std
    if scheme == "uniform":
        return torch.empty(shape, device=dev, dtype=torch.bfloat16).uniform_(-1e-3, 1e-3)
    return torch.zeros(shape, device=dev, dtype=torch.bfloat16)


def run(shape: tuple[int, int, int], scheme: str, seconds: float, chunks: int = 0) -> dict:
    """chunks 0: `x @ w` with w K x N in one piece; C >= 1: `F.linear` over C weights of N / C rows each."""
    m, k, n = shape
    x = make(scheme, (m, k), 1.0, "cuda")
    if chunks:
        if n % chunks:
            raise ValueError(f"--chunks {chunks} must divide N = {n}")
        ws = [make(scheme, (n // chunks, k), 0.02, "cuda") for _ in range(chunks)]
        outs = [torch.empty((m, n // chunks), device="cuda", dtype=torch.bfloat16) for _ in range(chunks)]

        def gemm() -> None:
            for w_i, o_i in zip(ws, outs):
                torch.matmul(x, w_i.T, out=o_i)
    else:
        w = make(scheme, (k, n), 0.02, "cuda")
        out = torch.empty((m, n), device="cuda", dtype=torch.bfloat16)

        def gemm() -> None:
            torch.matmul(x, w, out=out)
    for _ in range(3):
        gemm()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    gemm()
    torch.cuda.synchronize()
    iters = max(10, int(seconds / max(time.perf_counter() - t0, 1e-6)))
    time.sleep(1.0)  # let the board cool between pairs
    with ClockSampler(0.02) as s:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            gemm()
        end.record()
        torch.cuda.synchronize()
    ms = start.elapsed_time(end) / iters
    half = len(s.power_w) // 2  # the settled second half
    return dict(M=m, K=k, N=n, data=scheme, chunks=chunks, iters=iters, ms=ms, tflops=2 * m * k * n / ms / 1e9,
                power_w=sum(s.power_w[half:]) / max(1, len(s.power_w) - half),
                sm_mhz=sum(s.samples[half:]) / max(1, len(s.samples) - half))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--data", default="normal,uniform,zeros")
    ap.add_argument("--chunks", default="0", help="comma-separated; 0: x @ w in one piece, C: F.linear in C N-chunks")
    a = ap.parse_args()
    rows = []
    for name in a.shapes.split(","):
        for scheme in a.data.split(","):
            for chunks in (int(c) for c in a.chunks.split(",")):
                r = run(SHAPES[name], scheme, a.seconds, chunks)
                r["shape"] = name
                rows.append(r)
                print(f"{name:18s} {scheme:8s} chunks {chunks:2d} {r['ms']:8.3f} ms {r['tflops']:7.1f} TFLOP/s "
                      f"{r['power_w']:6.1f} W {r['sm_mhz']:6.0f} MHz", flush=True)
    with open(a.out, "w") as f:
        json.dump(dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
