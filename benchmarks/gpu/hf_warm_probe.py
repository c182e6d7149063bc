"""Why plain `transformers` generate is ~3x slower in its first full-length run than in the next ones (H200, 7B bs1:
TPOT 51 ms, then 16.6-17.4 ms; benchmarks/results/session15/accept_repeats_69f00b5/): runs the bench's hf backend
on one workload several times in one process, after the bench's own 4-token warm-up, and records per run the
throughput, TPOT, the CUDA caching allocator's device allocations (cudaMalloc calls) and reserved bytes, the SM
clock and the process's CPU time per output token. A slow first run with many new device allocations points at the
allocator; one with a low SM clock at the GPU's power state; one with more CPU per token at the host.

Usage (GPU): python benchmarks/gpu/hf_warm_probe.py --model qwen2.5-7b --workload bs1 --runs 4 --out out.json
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from clock_sampler import ClockSampler  # same folder (the script folder is on sys.path)

from tachyon.bench.backends import BackendOptions, get_backend
from tachyon.bench.metrics import summarize
from tachyon.bench.workloads import load_workload


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen2.5-7b")
    ap.add_argument("--workload", default="bs1")
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    wl = load_workload(a.workload)
    backend = get_backend("hf", BackendOptions(model=a.model, dummy=True))
    backend.load()
    # the bench's warm-up before stop 21 (4 tokens; now offline.warmup_workload runs full lengths)
    backend.run(wl.truncated(num_requests=min(len(wl.requests), 4), max_tokens=4))
    stats = torch.cuda.memory_stats if torch.cuda.is_available() else dict
    rows = []
    for i in range(a.runs):
        m0 = stats()
        cpu0 = time.process_time()
        with ClockSampler() as clocks:
            out = backend.run(wl)
        cpu = time.process_time() - cpu0
        m1 = stats()
        s = summarize(out.records, duration_s=out.duration_s)
        sm = sorted(clocks.samples)
        row = {"run": i + 1, "output_tok_s": s.output_throughput, "tpot_ms": (s.tpot.mean or 0) * 1e3,
               "ttft_ms": (s.ttft.mean or 0) * 1e3,
               "device_allocs": m1.get("num_device_alloc", 0) - m0.get("num_device_alloc", 0),
               "alloc_retries": m1.get("num_alloc_retries", 0) - m0.get("num_alloc_retries", 0),
               "reserved_gb": m1.get("reserved_bytes.all.current", 0) / 1e9,
               "sm_clock_median_mhz": sm[len(sm) // 2] if sm else None,
               "sm_clock_min_max_mhz": [sm[0], sm[-1]] if sm else None,
               "cpu_ms_per_token": cpu * 1e3 / max(1, s.output_tokens)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    backend.close()
    with open(a.out, "w") as fh:
        json.dump({"model": a.model, "workload": a.workload, "runs": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
