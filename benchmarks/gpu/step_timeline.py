"""Where a workload's time goes, step by step: runs one standard workload on the engine and records each
engine step's wall time with what it ran (a launched decode batch and its graph bucket, or a synchronous
prefill / mixed step and its token count). With overlap scheduling a step's wall time is the GPU time of
one step whenever the GPU is the bottleneck; each step also records the part of it spent waiting for the GPU
(`wait_ms`, inside PendingStep.tokens: ~0 means the host is the bottleneck). Prints and writes totals per kind
and per decode bucket.

Usage (GPU machine, repo root): python3 benchmarks/gpu/step_timeline.py --shape qwen2.5-7b --workload nano256 --out DIR
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from benchmarks.gpu.engine_gaps import gaps  # noqa: E402
from benchmarks.gpu.engine_smoke import load_workload  # noqa: E402
from benchmarks.gpu.profile_step import device_events, token_waits  # noqa: E402
from tachyon import LLM, SamplingParams  # noqa: E402


def gpu_busy(prof, nsteps: int) -> dict:
    """GPU busy time (the span less the idle gaps between device operations) of a profiled window, its span,
    and device time per kernel name per step (top 12)."""
    ev = device_events(prof)
    _, idle, span = gaps(ev)
    per: dict = defaultdict(float)
    for name, start, end in ev:
        per[name[:60]] += (end - start) / nsteps / 1e3
    top = dict(sorted(per.items(), key=lambda kv: -kv[1])[:12])
    return dict(gpu_busy_ms=(span - idle) / 1e3, gpu_span_ms=span / 1e3, kernels_ms_per_step=top)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="qwen2.5-7b")
    ap.add_argument("--workload", default="nano256")
    ap.add_argument("--max-num-batched-tokens", type=int, default=8192)
    ap.add_argument("--load-format", default="dummy")
    ap.add_argument("--limit", type=int, default=None, help="first N requests only")
    ap.add_argument("--max-model-len", type=int, default=4096)
    ap.add_argument("--temperature", type=float, default=None, help="override the workload's sampling (top-p 1)")
    ap.add_argument("--scheduling-policy", default=None, choices=["fcfs", "lpt", "flat"], help="default: the LLM's")
    ap.add_argument("--out", default="out")
    ap.add_argument("--profile-steps", default="",
                    help="comma-separated first:last step windows run under torch.profiler (that run's total is then "
                         "not comparable): per window the GPU's busy time (union of device ops) against the wall "
                         "time, and device time per kernel name, per step")
    args = ap.parse_args()
    llm = LLM(args.shape, load_format=args.load_format, max_model_len=args.max_model_len,
              max_num_batched_tokens=args.max_num_batched_tokens, max_num_seqs=512,
              scheduling_policy=args.scheduling_policy)
    eng, runner = llm.engine, llm.engine.runner
    reqs = load_workload(args.workload)[: args.limit]
    llm.generate([reqs[0]["prompt_token_ids"]], SamplingParams(max_tokens=8, ignore_eos=True), use_tqdm=False)
    last: dict = {}
    orig_launch, orig_execute = runner.launch, runner.execute

    def launch(sched):
        if max(sched.num_new_tokens) == 1:
            last.update(kind="decode", bs=len(sched.requests), tokens=len(sched.requests),
                        bucket=runner.graphs.bucket_for(len(sched.requests)) if runner.graphs else None)
        else:  # a launched prefill or mixed step (graphed mixed: its (decode, chunk) key)
            mixed = runner.mixed_graphs
            key = mixed.key_for(sched) if mixed is not None and mixed.fits(sched) else None
            last.update(kind="launched_mixed_graph" if key else "launched_prefill", bs=len(sched.requests),
                        tokens=sched.total_tokens, decode_rows=sum(1 for n in sched.num_new_tokens if n == 1),
                        bucket=list(key) if key else None)
        return orig_launch(sched)

    def execute(sched):
        decode = all(n == 1 for n in sched.num_new_tokens)
        mixed = runner.mixed_graphs is not None and not decode and runner.mixed_graphs.fits(sched)
        kind = "decode_sync" if decode else "mixed_graph" if mixed else "prefill_mixed"
        last.update(kind=kind, bs=len(sched.requests),
                    tokens=sched.total_tokens, decode_rows=sum(1 for n in sched.num_new_tokens if n == 1),
                    bucket=None)
        return orig_execute(sched)

    runner.launch, runner.execute = launch, execute

    def on_wait(seconds: float) -> None:
        last["wait_ms"] = last.get("wait_ms", 0.0) + 1e3 * seconds
    compiles: list[dict] = []  # Triton kernels compiled (or loaded from disk) during the timed run

    def on_compile(*_, repr=None, **__):
        compiles.append(dict(step=len(steps), t=time.perf_counter(), kernel=str(repr)[:300]))
        return None  # None: let Triton compile

    try:
        from triton import knobs

        knobs.runtime.jit_cache_hook = on_compile
    except (ImportError, AttributeError):
        pass
    temp, top_p = (0.7, 0.9) if args.workload == "seed8" else (0.0, 1.0)  # as engine_smoke.py
    if args.temperature is not None:
        temp, top_p = args.temperature, 1.0
    for i, r in enumerate(reqs):
        eng.add_request(f"t{i}", r["prompt_token_ids"], SamplingParams(max_tokens=r["max_tokens"], temperature=temp,
                                                                       top_p=top_p, seed=i, ignore_eos=True))
    steps: list[dict] = []
    windows = dict(tuple(int(x) for x in w.split(":")) for w in args.profile_steps.split(",") if w)  # first: last
    profiles: list[dict] = []
    prof = None
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    t0 = prev = time.perf_counter()
    with token_waits(on_wait):
        while eng.has_unfinished():
            last.clear()
            if len(steps) in windows:  # a profiled window starts at this step
                first, final = len(steps), windows[len(steps)]
                prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA])
                prof.start()
                win_t0 = time.perf_counter()
            eng.step(finished_only=True)
            now = time.perf_counter()
            steps.append(dict(ms=1e3 * (now - prev), **last))
            prev = now
            if prof is not None and len(steps) == final + 1:
                torch.cuda.synchronize()
                wall = time.perf_counter() - win_t0
                prof.stop()
                profiles.append(dict(first=first, last=final, wall_ms=1e3 * wall, **gpu_busy(prof, final - first + 1)))
                prof = None
    total = time.perf_counter() - t0
    by_kind: dict = defaultdict(lambda: dict(steps=0, ms=0.0, tokens=0))
    by_bucket: dict = defaultdict(lambda: dict(steps=0, ms=0.0, rows=0, wait_ms=0.0))
    for s in steps:
        k = by_kind[s.get("kind", "drain")]
        k["steps"] += 1
        k["ms"] += s["ms"]
        k["tokens"] += s.get("tokens", 0)
        if s.get("kind") == "decode":
            b = by_bucket[s["bucket"]]
            b["steps"] += 1
            b["ms"] += s["ms"]
            b["rows"] += s["bs"]
            b["wait_ms"] += s.get("wait_ms", 0.0)
    for b in by_bucket.values():
        b["mean_ms"] = b["ms"] / b["steps"]
        b["mean_host_ms"] = (b["ms"] - b["wait_ms"]) / b["steps"]
    res = dict(shape=args.shape, workload=args.workload, policy=eng.config.scheduling_policy, total_s=total,
               steps=len(steps), compiles=compiles,
               profiles=profiles,
               by_kind=by_kind,
               by_bucket=dict(sorted(by_bucket.items())),
               gpu=torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
               torch=torch.__version__, git=os.environ.get("GIT_SHA") or os.environ.get("TACHYON_GIT_SHA"))
    print(json.dumps(res, indent=1), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tag = f"_{eng.config.scheduling_policy}" + ("" if args.temperature is None else f"_t{args.temperature:g}")
    path = out / f"step_timeline_{Path(args.shape).name}_{args.workload}{tag}.json"
    path.write_text(json.dumps(dict(res, raw=steps)))


if __name__ == "__main__":
    main()
