"""Per-step timing of batch-1 runs, several in one process: is a slow run slow in every step (a per-process
state such as memory placement) or in a few (a stall)? Loads the engine as `tachyon bench offline` does (same
backend, same 4-token warm-up), then drives `engine.step()` itself for each run, timestamping every return (with
overlap scheduling a return waits for the previous step's tokens, so the gaps are the GPU's step times).

Each step's time is also split into the launch (`runner.launch`), the wait for the previous launched step's tokens
(`PendingStep.tokens`: the GPU) and the rest (scheduling, token processing: the host), so a stall shows where it
happened: in the wait, the GPU was late; elsewhere, the host. The longest step also gets the main thread's CPU time
(`time.thread_time`: far below the step's wall time, the thread was off the CPU) and each run the Python garbage
collections inside it (count and ms).

Usage (GPU): python benchmarks/gpu/bs1_steps.py --model qwen3-0.6b --runs 8 --out out.json
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time

from tachyon import SamplingParams
from tachyon.bench.backends import BackendOptions, get_backend
from tachyon.bench.gpu import GpuMeter
from tachyon.bench.offline import warmup_workload
from tachyon.bench.workloads import load_workload
from tachyon.engine.heap import unfreeze_heap


class PhaseTimer:
    """Wraps `engine.runner.launch` and each launched step's `tokens()` to time them (ms, per engine step)."""

    def __init__(self, engine) -> None:
        self.launch_ms = 0.0
        self.wait_ms = 0.0
        runner = engine.runner
        launch = runner.launch

        def timed_launch(sched):
            t = time.perf_counter()
            pending = launch(sched)
            self.launch_ms += (time.perf_counter() - t) * 1e3
            tokens = pending.tokens

            def timed_tokens():
                t1 = time.perf_counter()
                out = tokens()
                self.wait_ms += (time.perf_counter() - t1) * 1e3
                return out

            pending.tokens = timed_tokens
            return pending

        runner.launch = timed_launch

    def take(self) -> tuple[float, float]:
        """(launch, wait) ms since the last take."""
        out = (self.launch_ms, self.wait_ms)
        self.launch_ms = self.wait_ms = 0.0
        return out


def one_run(engine, prompt: list[int], max_tokens: int, rid: str, timer: PhaseTimer) -> dict:
    """One request to completion; the gaps (ms) between step() returns, the run's duration, and the longest
    steady step's index and phases."""
    params = SamplingParams(max_tokens=max_tokens, ignore_eos=True, detokenize=False, temperature=0.0)
    timer.take()
    collections = []
    started = {}

    def on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            started["t"] = time.perf_counter()
        elif "t" in started:
            collections.append((info["generation"], (time.perf_counter() - started.pop("t")) * 1e3))

    gc.callbacks.append(on_gc)
    t0 = time.perf_counter()
    engine.add_request(rid, prompt, params)
    stamps = [t0]
    cpu = [time.thread_time()]
    phases = []
    try:
        while engine.has_unfinished():
            engine.step(finished_only=True)
            stamps.append(time.perf_counter())
            cpu.append(time.thread_time())
            phases.append(timer.take())
    finally:
        gc.callbacks.remove(on_gc)
    gaps = [(b - a) * 1e3 for a, b in zip(stamps, stamps[1:])]
    steady = gaps[2:]  # past the prefill and the first launched decode step
    med = statistics.median(steady)
    worst = 2 + max(range(len(steady)), key=steady.__getitem__)
    launch_ms, wait_ms = phases[worst]
    return {"duration_ms": (stamps[-1] - t0) * 1e3, "steps": len(gaps), "first_gaps_ms": gaps[:3],
            "median_gap_ms": med, "mean_gap_ms": statistics.fmean(steady), "max_gap_ms": max(steady),
            "gaps_over_1.5x_median": sum(g > 1.5 * med for g in steady),
            "sum_excess_over_median_ms": sum(max(0.0, g - med) for g in steady),
            "median_wait_ms": statistics.median(w for _, w in phases[2:]),
            "gc_collections": [{"generation": g, "ms": ms} for g, ms in collections],
            "worst_step": {"index": worst, "gap_ms": gaps[worst], "launch_ms": launch_ms, "wait_ms": wait_ms,
                           "host_rest_ms": gaps[worst] - launch_ms - wait_ms,
                           "thread_cpu_ms": (cpu[worst + 1] - cpu[worst]) * 1e3}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen3-0.6b")
    ap.add_argument("--workload", default="bs1")
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--meter", action="store_true",
                    help="runs cycle through three kinds: plain, inside the bench's GpuMeter (NVML energy read "
                         "before and after), and the bench's own timed path (GpuMeter + backend.run: LLM.generate)")
    ap.add_argument("--no-freeze", action="store_true",
                    help="unfreeze the heap after the load (the bench's backend freezes it: engine.heap), as before "
                         "stop 21")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    wl = load_workload(a.workload)
    req = wl.requests[0]
    backend = get_backend("tachyon", BackendOptions(model=a.model, dummy=True))
    backend.load()
    if a.no_freeze:
        unfreeze_heap()
    backend.run(warmup_workload(wl))  # the bench's warm-up
    engine = backend.llm.engine
    timer = PhaseTimer(engine)
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
                r = one_run(engine, list(req.prompt_token_ids), req.max_tokens, f"r{i}", timer)
        else:
            r = one_run(engine, list(req.prompt_token_ids), req.max_tokens, f"r{i}", timer)
        runs.append({**r, "kind": kind})
    backend.close()
    for r in runs:
        if r["kind"] == "bench":
            continue
        w = r["worst_step"]
        print(f"{r['kind']:7} {r['duration_ms']:.2f} ms, {r['steps']} steps, median gap {r['median_gap_ms']:.4f} ms, "
              f"mean "
              f"{r['mean_gap_ms']:.4f}, max {r['max_gap_ms']:.3f}, {r['gaps_over_1.5x_median']} over 1.5x median "
              f"(excess {r['sum_excess_over_median_ms']:.2f} ms); worst step {w['index']}: launch "
              f"{w['launch_ms']:.3f}, wait {w['wait_ms']:.3f} (median {r['median_wait_ms']:.3f}), host rest "
              f"{w['host_rest_ms']:.3f}, thread CPU {w['thread_cpu_ms']:.3f} ms; {len(r['gc_collections'])} GC "
              f"collections ({sum(c['ms'] for c in r['gc_collections']):.2f} ms)")
    with open(a.out, "w") as fh:
        json.dump({"model": a.model, "workload": a.workload, "frozen_heap": not a.no_freeze, "runs": runs}, fh,
                  indent=1)


if __name__ == "__main__":
    main()
