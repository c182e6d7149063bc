"""What could a different schedule win on Qwen2.5-7B nano256? A step-cost model calibrated on H200 step replays,
run over the workload's requests under two admission policies.

Costs (ms; benchmarks/results/decode_fused_session9/): GEMMs of a step interpolated in its row count between
measured points (a graphed bs1 step 3.55; cuBLAS at 32 / 96 / 160 / 256 rows 4.04 / 4.13 / 4.56 / 5.0 from
`step_trace` at a 1,024-token context; 147.5 at 8,192 prefill rows from `prefill_trace`); decode attention
= context keys x 57,344 bytes at 4.17 TB/s (3.62 ms at B=256 x 1,024 keys); prefill attention 0.9 us per
token; other kernels 0.2 + 0.6 x rows / 256; a step carrying prefill tokens is eager and synchronous: + `--eager-ms`.
Decode-only steps pad to the graph buckets. The model ignores the power cap that the real run hits (SM clocks
1.4-1.65 GHz for most of it), so absolute times are low by ~11%; the comparison between policies is the point.

Policies: `fcfs` (the engine's: admit in arrival order under the 8,192-token budget, so every prompt is
prefilled in the first steps) and `longest-first` (admit by max_tokens, longest first, with a per-step budget of
`rows - decode rows` prefill tokens, so prefills ride on decode steps that would be weight-read-bound; needs each
request's output length known ahead, i.e. max_tokens with ignore_eos).

Usage: python3 benchmarks/schedule_sim.py [--workload PATH] [--rows 256,320,384,512,1024] [--eager-ms 1,3]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

GEMM_POINTS = [(1, 3.55), (8, 3.9), (32, 4.04), (96, 4.13), (160, 4.56), (256, 5.0), (8192, 147.5)]
BUCKETS = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 224, 256)  # stop 15's decode graphs (the calibration's)
KV_BYTES_PER_TOKEN = 57344  # 28 layers x K and V x 4 KV heads x 128 x 2 bytes
ATTN_BW = 4.17e12
PREFILL_ATTN_S_PER_TOKEN = 0.9e-6


def gemm_s(rows: int) -> float:
    xs, ys = zip(*GEMM_POINTS)
    return float(np.interp(rows, xs, ys)) * 1e-3


def step_s(n_dec: int, n_pre: int, ctx: int, eager_s: float) -> float:
    rows = next(b for b in BUCKETS if b >= n_dec) if n_dec and not n_pre else n_dec + n_pre
    t = gemm_s(rows) + ctx * KV_BYTES_PER_TOKEN / ATTN_BW + 0.2e-3 + 0.6e-3 * rows / 256
    return t + (PREFILL_ATTN_S_PER_TOKEN * n_pre + eager_s if n_pre else 0.0)


def simulate(ins: list[int], outs: list[int], order: list[int], budget, eager_s: float) -> tuple[float, int]:
    """Seconds and steps to run every request; budget(decode rows) = prefill tokens allowed this step."""
    waiting, run, total, steps = list(order), {}, 0.0, 0
    while waiting or run:
        dec = [i for i, s in run.items() if s[0] >= ins[i]]
        left, n_pre = budget(len(dec)), 0
        for i, s in run.items():  # unfinished prefill chunks first
            if s[0] < ins[i] and left > 0:
                n = min(ins[i] - s[0], left)
                s[0], left, n_pre = s[0] + n, left - n, n_pre + n
        while waiting and left > 0:
            i = waiting.pop(0)
            n = min(ins[i], left)
            run[i] = [n, 0]
            left, n_pre = left - n, n_pre + n
        total += step_s(len(dec), n_pre, sum(ins[i] + run[i][1] for i in dec), eager_s)
        steps += 1
        for i in list(run):
            s = run[i]
            if i in dec or s[0] >= ins[i]:  # a decode, or a prefill finished this step: one token
                s[1] += 1
            if s[1] >= outs[i]:
                del run[i]
    return total, steps


def main() -> None:
    ap = argparse.ArgumentParser()
    root = Path(__file__).resolve().parents[1]
    ap.add_argument("--workload", default=str(root / "tachyon" / "bench" / "workloads" / "nano256.json"))
    ap.add_argument("--rows", default="256,320,384,512,768,1024")
    ap.add_argument("--eager-ms", default="1,3")
    args = ap.parse_args()
    reqs = json.loads(Path(args.workload).read_text())["requests"]
    ins = [len(r["prompt_token_ids"]) for r in reqs]
    outs = [r["max_tokens"] for r in reqs]
    tokens = sum(outs)
    t, n = simulate(ins, outs, list(range(len(reqs))), lambda d: 8192 - d, 1e-3)
    print(f"fcfs, 8,192-token budget: {t:.2f} s, {tokens / t:,.0f} tok/s, {n} steps")
    longest = sorted(range(len(reqs)), key=lambda i: -outs[i])
    for eager in (float(x) * 1e-3 for x in args.eager_ms.split(",")):
        for rows in (int(x) for x in args.rows.split(",")):
            t, n = simulate(ins, outs, longest, lambda d, rows=rows: max(rows - d, 0), eager)
            print(f"longest-first, {rows} rows per step, eager steps +{eager * 1e3:.0f} ms: {t:.2f} s, "
                  f"{tokens / t:,.0f} tok/s, {n} steps")


if __name__ == "__main__":
    main()
