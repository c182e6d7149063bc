"""What could a different schedule win on Qwen2.5-7B nano256? A step-cost model calibrated on H200 step replays,
run over the workload's requests under several admission policies; `--dump` writes each policy's steps (GEMM rows,
lm_head rows) for `benchmarks/gpu/schedule_power.py`, which replays their GEMMs on the GPU at the power cap.

Costs (ms; benchmarks/results/decode_fused_session9/): GEMMs of a step interpolated in its row count between
measured points (a graphed bs1 step 3.55; cuBLAS at 32 / 96 / 160 / 256 rows 4.04 / 4.13 / 4.56 / 5.0 from
`step_trace` at a 1,024-token context; 147.5 at 8,192 prefill rows from `prefill_trace`); decode attention
= context keys x 57,344 bytes at 4.17 TB/s (3.62 ms at B=256 x 1,024 keys); prefill attention 0.9 us per
token; other kernels 0.2 + 0.6 x rows / 256; a step carrying prefill tokens costs `--eager-ms` more (eager and
synchronous in the engine of stop 26). Decode-only steps pad to the graph buckets. The model ignores the power cap
that the real run hits (SM clocks 1.4-1.65 GHz for most of it), so absolute times are low by ~11%, and it cannot say
whether a schedule that keeps the tensor cores busier is bound by the cap's energy instead: schedule_power.py
measures that.

Policies:
  fcfs            the engine's: admit in arrival order under the 8,192-token budget (every prompt is prefilled in
                  the first steps).
  longest-R       admit by max_tokens, longest first, with `R - decode rows` prefill tokens a step, so prefills
                  ride on decode steps that would be weight-read-bound (needs each request's output length ahead:
                  max_tokens with ignore_eos).
  lpt-N           admit longest first under the 8,192-token budget while fewer than N requests run: a flatter
                  decode batch with prefills in few large steps.
  lpt-balanced    the same with N = ceil(remaining output tokens / longest remaining output), recomputed each step,
                  and the due / due-soon admissions (the engine's `scheduling_policy="lpt"`).

Usage: python3 benchmarks/schedule_sim.py [--workload PATH] [--rows 256,288,320] [--lpt 128,160]
                                          [--eager-ms 0,1,3] [--dump schedules.json]
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

GEMM_POINTS = [(1, 3.55), (8, 3.9), (32, 4.04), (96, 4.13), (160, 4.56), (256, 5.0), (8192, 147.5)]
# tachyon.engine.cuda_graph.BUCKETS at stop 26 (every 16 rows from 64 to 256)
BUCKETS = (1, 2, 4, 8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256, 320, 384, 448,
           512)
KV_BYTES_PER_TOKEN = 57344  # 28 layers x K and V x 4 KV heads x 128 x 2 bytes
ATTN_BW = 4.17e12
PREFILL_ATTN_S_PER_TOKEN = 0.9e-6
STEP_BUDGET = 8192
LPT_DUE_SOON = 0.9  # tachyon.engine.scheduler.LPT_DUE_SOON


@dataclass
class Step:
    rows: int  # GEMM rows (decode-only steps padded to their graph bucket)
    lm_rows: int  # rows that reach lm_head: decode rows (padded likewise) + prompts finishing this step
    prefill: int  # prompt tokens in the step
    ctx: int  # keys the step's decode rows read


def gemm_s(rows: int) -> float:
    xs, ys = zip(*GEMM_POINTS)
    return float(np.interp(rows, xs, ys)) * 1e-3


def step_s(st: Step, eager_s: float) -> float:
    t = gemm_s(st.rows) + st.ctx * KV_BYTES_PER_TOKEN / ATTN_BW + 0.2e-3 + 0.6e-3 * st.rows / 256
    return t + (PREFILL_ATTN_S_PER_TOKEN * st.prefill + eager_s if st.prefill else 0.0)


def balanced_cap(outs: list[int], waiting: list[int], run: dict) -> int:
    """The engine's `lpt` cap on running requests: ceil(remaining output tokens / horizon), the horizon being the
    steps the running requests need anyway (their longest remaining output), so the batch stays flat and every
    request ends near when the longest must; a waiting request at least as long as the horizon is due at once, and
    those LPT_DUE_SOON of it long with it. `waiting` is longest first."""
    if not waiting:
        return len(run)
    running = [outs[i] - run[i][1] for i in run]
    horizon = max(running) if running else outs[waiting[0]]  # the steps the running requests need anyway
    cap = -(-(sum(running) + sum(outs[i] for i in waiting)) // horizon)
    if outs[waiting[0]] >= horizon:  # the longest waiting request cannot end sooner than that: it is due now,
        # and those due soon (LPT_DUE_SOON of the horizon) with it
        due = sum(1 for i in waiting if outs[i] >= LPT_DUE_SOON * horizon)
        return max(cap, len(run) + due)
    return cap


def simulate(ins: list[int], outs: list[int], order: list[int], budget, max_running=None) -> list[Step]:
    """The steps that run every request; budget(decode rows) = prefill tokens allowed this step; at most
    max_running(waiting, running) requests run at once (None: no cap)."""
    waiting, run, steps = list(order), {}, []
    while waiting or run:
        dec = [i for i, s in run.items() if s[0] >= ins[i]]
        left, n_pre, finishing = budget(len(dec)), 0, 0
        cap = max_running(waiting, run) if max_running else 1 << 30
        for i, s in run.items():  # unfinished prefill chunks first
            if s[0] < ins[i] and left > 0:
                n = min(ins[i] - s[0], left)
                s[0], left, n_pre = s[0] + n, left - n, n_pre + n
                finishing += s[0] >= ins[i]
        while waiting and left > 0 and len(run) < cap:
            i = waiting.pop(0)
            n = min(ins[i], left)
            run[i] = [n, 0]
            left, n_pre = left - n, n_pre + n
            finishing += n >= ins[i]
        pad = next(b for b in BUCKETS if b >= len(dec)) if dec and not n_pre else len(dec)
        steps.append(Step(pad + n_pre, pad + finishing, n_pre, sum(ins[i] + run[i][1] for i in dec)))
        for i in list(run):
            s = run[i]
            if i in dec or s[0] >= ins[i]:  # a decode, or a prefill finished this step: one token
                s[1] += 1
            if s[1] >= outs[i]:
                del run[i]
    return steps


def policies(ins: list[int], outs: list[int], rows: list[int], lpt: list[int]) -> dict[str, list[Step]]:
    longest = sorted(range(len(ins)), key=lambda i: -outs[i])
    out = {"fcfs": simulate(ins, outs, list(range(len(ins))), lambda d: STEP_BUDGET - d)}
    for r in rows:
        out[f"longest-{r}"] = simulate(ins, outs, longest, lambda d, r=r: max(r - d, 0))
    for n in lpt:
        out[f"lpt-{n}"] = simulate(ins, outs, longest, lambda d: STEP_BUDGET - d, lambda w, r, n=n: n)
    out["lpt-balanced"] = simulate(ins, outs, longest, lambda d: STEP_BUDGET - d,
                                   lambda w, r: balanced_cap(outs, w, r))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    root = Path(__file__).resolve().parents[1]
    ap.add_argument("--workload", default=str(root / "tachyon" / "bench" / "workloads" / "nano256.json"))
    ap.add_argument("--rows", default="256,288,320,384")
    ap.add_argument("--lpt", default="128,144,160,192")
    ap.add_argument("--eager-ms", default="0,1,3")
    ap.add_argument("--dump", help="write every policy's steps here (JSON), for benchmarks/gpu/schedule_power.py")
    args = ap.parse_args()
    reqs = json.loads(Path(args.workload).read_text())["requests"]
    ins = [len(r["prompt_token_ids"]) for r in reqs]
    outs = [r["max_tokens"] for r in reqs]
    tokens = sum(outs)
    ints = lambda s: [int(x) for x in s.split(",") if x]  # noqa: E731
    runs = policies(ins, outs, ints(args.rows), ints(args.lpt))
    eagers = [float(x) * 1e-3 for x in args.eager_ms.split(",")]
    heads = " | ".join(f"+{e * 1e3:g} ms eager: s, tok/s" for e in eagers)
    print(f"policy | steps | mixed steps | GEMM rows | {heads}")
    for name, steps in runs.items():
        times = [sum(step_s(st, e) for st in steps) for e in eagers]
        cols = " | ".join(f"{t:.2f}, {tokens / t:,.0f}" for t in times)
        mixed = sum(1 for st in steps if st.prefill)
        print(f"{name} | {len(steps)} | {mixed} | {sum(st.rows for st in steps):,} | {cols}")
    if args.dump:
        Path(args.dump).write_text(json.dumps({
            "workload": Path(args.workload).name, "output_tokens": tokens,
            "policies": {k: [[st.rows, st.lm_rows, st.prefill, st.ctx] for st in v] for k, v in runs.items()}}))


if __name__ == "__main__":
    main()
