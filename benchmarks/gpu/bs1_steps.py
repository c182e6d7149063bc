"""Per-step timing of batch-1 runs, several in one process: is a slow run slow in every step (a per-process
state such as memory placement) or in a few (a stall)? Loads the engine as `tachyon bench offline` does (same
backend, same 4-token warm-up), then drives `engine.step()` itself for each run, timestamping every return (with
overlap scheduling a return waits for the previous step's tokens, so the gaps are the GPU's step times).

Usage (GPU): python benchmarks/gpu/bs1_steps.py --model qwen3-0.6b --runs 8 --out out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from tachyon import SamplingParams
from tachyon.bench.backends import BackendOptions, get_backend
from tachyon.bench.gpu import GpuMeter
from tachyon.bench.workloads import load_workload


def one_run(engine, prompt: list[int], max_tokens: int, rid: str) -> dict:
    """One request to completion; the gaps (ms) between step() returns and the run's duration."""
    params = SamplingParams(max_tokens=max_tokens, ignore_eos=True, detokenize=False, temperature=0.0)
    t0 = time.perf_counter()
    engine.add_request(rid, prompt, params)
    stamps = [t0]
    while engine.has_unfinished():
        engine.step(finished_only=True)
        stamps.append(time.perf_counter())
    gaps = [(b - a) * 1e3 for a, b in zip(stamps, stamps[1:])]
    steady = gaps[2:]  # past the prefill and the first launched decode step
    med = statistics.median(steady)
    return {"duration_ms": (stamps[-1] - t0) * 1e3, "steps": len(gaps), "first_gaps_ms": gaps[:3],
            "median_gap_ms": med, "mean_gap_ms": statistics.fmean(steady), "max_gap_ms": max(steady),
            "gaps_over_1.5x_median": sum(g > 1.5 * med for g in steady),
            "sum_excess_over_median_ms": sum(max(0.0, g - med) for g in steady)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen3-0.6b")
    ap.add_argument("--workload", default="bs1")
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--meter", action="store_true",
                    help="runs cycle through three kinds: plain, inside the bench's GpuMeter (NVML energy read "
                         "before and after), and the bench's own timed path (GpuMeter + backend.run: LLM.generate)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    wl = load_workload(a.workload)
    req = wl.requests[0]
    backend = get_backend("tachyon", BackendOptions(model=a.model, dummy=True))
    backend.load()
    backend.run(wl.truncated(num_requests=1, max_tokens=4))  # the bench's warm-up
    engine = backend.llm.engine
    runs = []
    for i in range(a.runs):
        kind = ("plain", "metered", "bench")[i % 3] if a.meter else "plain"
        if kind == "bench":
            with GpuMeter():
                out = backend.run(wl)
            runs.append({"kind": kind, "duration_ms": out.duration_s * 1e3})
            print(f"bench   {out.duration_s * 1e3:.2f} ms")
            continue
        if kind == "metered":
            with GpuMeter():
                r = one_run(engine, list(req.prompt_token_ids), req.max_tokens, f"r{i}")
        else:
            r = one_run(engine, list(req.prompt_token_ids), req.max_tokens, f"r{i}")
        runs.append({**r, "kind": kind})
    backend.close()
    for r in runs:
        if r["kind"] == "bench":
            continue
        print(f"{r['kind']:7} {r['duration_ms']:.2f} ms, {r['steps']} steps, median gap {r['median_gap_ms']:.4f} ms, "
              f"mean "
              f"{r['mean_gap_ms']:.4f}, max {r['max_gap_ms']:.3f}, {r['gaps_over_1.5x_median']} over 1.5x median "
              f"(excess {r['sum_excess_over_median_ms']:.2f} ms)")
    with open(a.out, "w") as fh:
        json.dump({"model": a.model, "workload": a.workload, "runs": runs}, fh, indent=1)


if __name__ == "__main__":
    main()
