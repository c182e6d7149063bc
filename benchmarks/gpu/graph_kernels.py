"""Which kernels of the engine's own batch-1 decode graph are slower in a process in Qwen3-0.6B bs1's slow mode
(~2% lower tok/s in every run of the process, ~12-14 us per step: benchmarks/results/session15/). step_trace.py
re-captures its graph and so cannot see a state of the graph captured at start-up; this probe replays that graph.

Loads the engine as `tachyon bench offline` does, times the bs1 workload (the process's mode; SM and memory clocks
sampled meanwhile), runs it once more under torch.profiler (CUDA activity only) to see the device in the engine's
steps (idle gaps, copies, each kernel's time), then replays the engine's captured batch-1 graph (its inputs as the
last run's last step left them) under torch.profiler: per kernel name, what it adds to a step
(step_trace.contributions) and its mean duration; and again framed by the engine's step boundary (`framed_replays`:
the staging upload before and the token copy after each replay, with and without waiting for each). Also records
where the graph's static buffers, the KV cache, the decode graph's outputs and the first layer's weights sit (device
addresses, to compare placements between modes).

Usage (GPU): python benchmarks/gpu/graph_kernels.py --model qwen3-0.6b --out out.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from benchmarks.gpu.clock_sampler import ClockSampler  # noqa: E402
from benchmarks.gpu.profile_step import device_events  # noqa: E402
from benchmarks.gpu.step_trace import contributions  # noqa: E402
from tachyon.bench.backends import BackendOptions, get_backend  # noqa: E402
from tachyon.bench.metrics import summarize  # noqa: E402
from tachyon.bench.offline import warmup_workload  # noqa: E402
from tachyon.bench.workloads import load_workload  # noqa: E402


def addresses(runner) -> dict[str, int]:
    g = runner.graphs
    out = {name: t.data_ptr() for name, t in vars(g).items() if isinstance(t, torch.Tensor)}
    out |= {f"out1_{i}": t.data_ptr() for i, t in enumerate(g.outputs[1]) if isinstance(t, torch.Tensor)}
    out["kv_layer0"] = runner.kv_caches[0].data_ptr()
    out["last_tokens"] = runner.last_tokens.data_ptr()
    for name, p in runner.model.layers[0].named_parameters():
        out[f"layer0.{name}"] = p.data_ptr()
    return out


def step_boundaries(ev: list[tuple[str, float, float]], steps: int) -> dict:
    """What the device does in one engine run, per step: the idle time between device operations (us), each copy or
    memset's count and mean duration (us), and each kernel's summed duration (us)."""
    idle = 0.0
    gaps = []
    end = ev[0][2]
    for _, s, e in ev[1:]:
        if s > end:
            idle += s - end
            gaps.append(s - end)
        end = max(end, e)
    other: dict[str, list[float]] = defaultdict(list)
    kernels: dict[str, list[float]] = defaultdict(list)
    for name, s, e in ev:
        (other if "emcpy" in name or "emset" in name else kernels)[name[:50]].append(e - s)
    gaps.sort()
    return {"idle_us_per_step": idle / steps, "gaps_over_2us": sum(g > 2 for g in gaps),
            "gap_percentiles_us": {q: gaps[int(q / 100 * (len(gaps) - 1))] for q in (50, 90, 99)} if gaps else {},
            "copies": {k: {"per_step": len(v) / steps, "mean_us": sum(v) / len(v)} for k, v in other.items()},
            "span_us_per_step": (ev[-1][2] - ev[0][1]) / steps,
            "kernel_us_per_step": dict(sorted(((k, sum(v) / steps) for k, v in kernels.items()),
                                              key=lambda kv: -kv[1])),
            "kernel_calls_per_step": {k: len(v) / steps for k, v in kernels.items()}}


def framed_replays(runner, replays: int, kind: str) -> dict:
    """The engine's batch-1 graph replayed with the engine's step boundary around each replay: the staging upload
    before (`DecodeGraphRunner._upload`, alternating the two host sets as the last run left them) and the token
    copy to pinned memory plus its event after (`ModelRunner.launch`); with kind "copies_sync" the host also waits
    for each step's event before the next upload (no step queued ahead). Profiled like an engine run."""
    g = runner.graphs
    graph = g.graphs[1]
    host_us: dict[str, list[float]] = defaultdict(list)

    def step(i: int) -> None:
        t0 = time.perf_counter()
        g._upload(1)
        t1 = time.perf_counter()
        graph.replay()
        t2 = time.perf_counter()
        host_us["upload"].append((t1 - t0) * 1e6)
        host_us["graph_launch"].append((t2 - t1) * 1e6)
        host, event = runner._host_tokens[i % 2], runner._token_events[i % 2]
        host[:1].copy_(runner.last_tokens[:1], non_blocking=True)
        event.record()
        if kind == "copies_sync":
            event.synchronize()

    for i in range(4):
        step(i)
    torch.cuda.synchronize()
    host_us.clear()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for i in range(replays):
            step(i)
        torch.cuda.synchronize()
    out = step_boundaries(device_events(prof), replays)
    out["host_median_us"] = {k: sorted(v)[len(v) // 2] for k, v in host_us.items()}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen3-0.6b")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--replays", type=int, default=30)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    wl = load_workload("bs1")
    backend = get_backend("tachyon", BackendOptions(model=a.model, dummy=True))
    backend.load()
    backend.run(warmup_workload(wl))
    speeds = []
    with ClockSampler(0.02) as clocks:
        for _ in range(a.runs):
            out = backend.run(wl)
            speeds.append(summarize(out.records, duration_s=out.duration_s).output_throughput)
    sm, mem = sorted(clocks.samples), sorted(clocks.mem_samples)
    clock = {"sm_mhz_min_median_max": [sm[0], sm[len(sm) // 2], sm[-1]] if sm else None,
             "mem_mhz_min_median_max": [mem[0], mem[len(mem) // 2], mem[-1]] if mem else None, "samples": len(sm)}
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        backend.run(wl)
    boundary = step_boundaries(device_events(prof), wl.requests[0].max_tokens)
    runner = backend.llm.engine.runner
    graph = runner.graphs.graphs[1]
    for _ in range(5):
        graph.replay()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(a.replays):
            graph.replay()
        torch.cuda.synchronize()
    ev = device_events(prof)
    per = contributions(ev, a.replays)
    dur: dict[str, list[float]] = defaultdict(list)
    for name, s, e in ev:
        dur[name[:60]].append(e - s)
    mean_us = {k: sum(v) / len(v) for k, v in dur.items()}
    calls = {k: len(v) / a.replays for k, v in dur.items()}
    step_us = (ev[-1][2] - ev[0][1]) / a.replays
    framed = {kind: framed_replays(runner, a.replays, kind) for kind in ("copies", "copies_sync")}
    res = {"model": a.model, "tok_s": speeds, "clocks_during_runs": clock, "replay_step_us": step_us,
           "engine_run": boundary, "framed_replays": framed,
           "contribution_us": per,
           "mean_kernel_us": mean_us, "calls_per_step": calls, "addresses": addresses(runner)}
    backend.close()
    top = ", ".join(f"{k[:22]} {v:.1f}" for k, v in list(per.items())[:7])
    print(f"tok/s {', '.join(f'{s:.1f}' for s in speeds)}; replayed step {step_us:.1f} us; {top}", flush=True)
    print(f"engine runs' clocks (NVML every 20 ms): {clock}", flush=True)
    copies = "; ".join(f"{k[:30]} x{v['per_step']:.2f} {v['mean_us']:.2f} us" for k, v in boundary["copies"].items())
    print(f"engine run under the profiler: span {boundary['span_us_per_step']:.1f} us/step, device idle "
          f"{boundary['idle_us_per_step']:.2f} us/step, gaps p50/p90/p99 {boundary['gap_percentiles_us']}; "
          f"{copies}", flush=True)
    busy = ", ".join(f"{k[:22]} {v:.1f}" for k, v in list(boundary["kernel_us_per_step"].items())[:8])
    print(f"engine run kernel time per step (us, summed durations): {busy}", flush=True)
    for kind, f in framed.items():
        busy = ", ".join(f"{k[:22]} {v:.1f}" for k, v in list(f["kernel_us_per_step"].items())[:6])
        print(f"framed replays ({kind}): span {f['span_us_per_step']:.1f} us/step, idle {f['idle_us_per_step']:.2f}, "
              f"host medians {f['host_median_us']}; {busy}", flush=True)
    Path(a.out).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
