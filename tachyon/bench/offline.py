"""`bench offline`: run one workload through one or more backends, one after another, same settings.

Contract: `run_offline(backends, opts, workload, warmup=True, repeats=1)` returns a `BenchResult(kind="offline")`
with one `Run` per backend (label = backend name). Each backend: load, an untimed warm-up (`warmup_workload`: the
backend's `warmup_requests` first requests at full length), then `repeats` timed runs of the whole workload, each
inside a `GpuMeter`. With `isolate` (the default when several backends run on a GPU) each backend runs in its own
fresh child process (`isolated.py`), so that one backend's device-memory state cannot bias the next;
`Run.config["pid"]` names the process that ran it. The `Run` is the median one by output throughput (the lower
median for an even count): every figure of it comes from that one real run, never a mix. A backend that fails (when
several run) becomes a warning, not a lost run. `summary.extra` holds the exactness check of the output token count
(over every repeat), load time, peak GPU memory (over every repeat), energy and tokens/J, for single-request
workloads the achieved weight-read bandwidth (bytes read per decode step / TPOT), and with repeats > 1 every
repeat's throughput, duration, TTFT, TPOT and energy (`repeats`) and which one is reported (`repeat_chosen`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from tachyon.bench.backends import BackendOptions, get_backend
from tachyon.bench.env import capture_env
from tachyon.bench.gpu import GpuMeter
from tachyon.bench.metrics import summarize
from tachyon.bench.schema import BenchResult, Run
from tachyon.bench.shapes import DTYPE_BYTES, resolve_shape
from tachyon.bench.workloads import Workload


def _weight_bytes_per_step(opts: BackendOptions, dtype: str | None) -> float | None:
    try:
        shape = resolve_shape(opts.model_path() or "")
    except (ValueError, OSError, KeyError):
        return None
    return shape.decode_read_params() * DTYPE_BYTES.get(dtype or "bfloat16", 2)


def _resolved_dtype(opts: BackendOptions) -> str:
    if opts.dtype != "auto":
        return opts.dtype
    from tachyon.bench.gpu import cuda_available

    return "bfloat16" if cuda_available() and opts.device != "cpu" else "float32"


# timed runs shorter than this get a hint to repeat them (a 0.17-s Qwen3-0.6B bs1 run lost ~1% to one 2.3-ms step on
# an H200: 170.55 ms against 168.4-169.0, benchmarks/results/session14/bs1steps14_6c08e0f/)
SHORT_RUN_S = 1.0


def _exact(summary, records, workload: Workload) -> bool:
    return summary.output_tokens == workload.output_tokens and all(r.output_tokens == r.max_tokens for r in records)


def _repeat_row(summary, energy_j: float | None) -> dict:
    """One timed repeat as `summary.extra["repeats"]` lists it (ms for TTFT / TPOT means)."""
    ms = (lambda v: None if v is None else v * 1e3)
    return {"output_tok_s": summary.output_throughput, "duration_s": summary.duration_s,
            "ttft_mean_ms": ms(summary.ttft.mean), "tpot_mean_ms": ms(summary.tpot.mean), "energy_j": energy_j}


def warmup_workload(workload: Workload, max_tokens: int | None = None, num_requests: int = 4) -> Workload:
    """The untimed warm-up: the workload's first `num_requests` requests (the backend's `warmup_requests`) at their
    full output lengths (or capped at `max_tokens`), so that the lengths and batch shapes the timed run reaches have
    been through the backend once. (After 4-token warm-ups, plain `transformers` ran its first full-length 7B bs1 run
    at TPOT 51-60 ms and the next ones at 16.6-19.9 ms on an H200, its host's CPU time per token following:
    benchmarks/results/session15/.)"""
    return workload.truncated(num_requests=min(len(workload.requests), max(1, num_requests)), max_tokens=max_tokens)


def _check_counts(repeats: int, warmup_max_tokens: int | None) -> None:
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    if warmup_max_tokens is not None and warmup_max_tokens < 1:
        raise ValueError(f"warmup_max_tokens must be at least 1 (or None: full length), got {warmup_max_tokens}")


def run_backend(name: str, opts: BackendOptions, workload: Workload, warmup: bool = True,
                log: Callable[[str], None] = print, repeats: int = 1, warmup_max_tokens: int | None = None) -> Run:
    _check_counts(repeats, warmup_max_tokens)
    backend = get_backend(name, opts)
    t0 = time.perf_counter()
    backend.load()
    load_s = time.perf_counter() - t0
    timed = []  # (BackendRun, peak GB, energy J) per repeat
    try:
        warm_s = 0.0
        if warmup:
            t1 = time.perf_counter()
            backend.run(warmup_workload(workload, warmup_max_tokens, backend.warmup_requests))
            warm_s = time.perf_counter() - t1
        log(f"[{name}] loaded in {load_s:.1f}s, warm-up {warm_s:.1f}s; running {len(workload.requests)} "
            f"requests ({workload.input_tokens} in / {workload.output_tokens} out tokens)"
            + (f", {repeats} times" if repeats > 1 else ""))
        for _ in range(repeats):
            with GpuMeter() as meter:
                out = backend.run(workload)
            timed.append((out, meter.peak_mem_gb, meter.energy_j))
        info = backend.info()
    finally:
        backend.close()
    summaries = [summarize(o.records, duration_s=o.duration_s) for o, _, _ in timed]
    by_speed = sorted(range(repeats), key=lambda i: summaries[i].output_throughput)
    pick = by_speed[(repeats - 1) // 2]
    out, _, energy_j = timed[pick]
    summary = summaries[pick]
    peaks = [p for _, p, _ in timed if p is not None]
    dtype = _resolved_dtype(opts)
    extra: dict = {
        "expected_output_tokens": workload.output_tokens,
        "exact_output_tokens": all(_exact(sm, o.records, workload) for sm, (o, _, _) in zip(summaries, timed)),
        "load_s": load_s, "warmup_s": warm_s, "warmup_max_tokens": warmup_max_tokens if warmup else 0,
        "peak_gpu_mem_gb": max(peaks) if peaks else None,
        "energy_j": energy_j,
        "tokens_per_joule": (summary.output_tokens / energy_j) if energy_j else None,
    }
    if repeats > 1:
        extra["repeats"] = [_repeat_row(sm, e) for sm, (_, _, e) in zip(summaries, timed)]
        extra["repeat_chosen"] = pick
        speeds = [summaries[i].output_throughput for i in by_speed]
        log(f"[{name}] {repeats} runs: {', '.join(f'{v:.1f}' for v in speeds)} output tok/s; reporting run "
            f"{pick + 1}, the median")
    if len(workload.requests) == 1 and summary.tpot.mean:
        wb = _weight_bytes_per_step(opts, dtype)
        extra["weight_read_gbps"] = wb / summary.tpot.mean / 1e9 if wb else None
    summary.extra = extra
    log(f"[{name}] {summary.output_throughput:.1f} output tok/s, {summary.output_tokens} tokens "
        f"({'exact' if extra['exact_output_tokens'] else 'NOT EXACT'}) in {summary.duration_s:.2f}s")
    if repeats == 1 and 0 < summary.duration_s < SHORT_RUN_S:
        log(f"[{name}] note: a {summary.duration_s:.2f}-s run moves by a percent or more with one millisecond-scale "
            f"stall of the host or driver; --repeats 5 reports the median of five")
    return Run(label=name, config={"backend": name, "dtype": dtype, "pid": os.getpid(), **info}, summary=summary,
               requests=out.records)


def default_isolation(backends: list[str], opts: BackendOptions) -> bool:
    """Whether `run_offline` runs each backend in its own process by default: when several backends share a GPU."""
    from tachyon.bench.gpu import cuda_available

    return len(backends) > 1 and opts.device != "cpu" and cuda_available()


def run_offline(backends: list[str], opts: BackendOptions, workload: Workload, warmup: bool = True,
                log: Callable[[str], None] = print, repeats: int = 1,
                warmup_max_tokens: int | None = None, isolate: bool | None = None) -> BenchResult:
    """`isolate`: run each backend in a fresh child process (None: `default_isolation`). The child logs to this
    process's stdout; `log` receives only this function's own lines."""
    _check_counts(repeats, warmup_max_tokens)  # before any backend loads: with several, a per-backend error
    # would only become a warning
    if isolate is None:
        isolate = default_isolation(backends, opts)
    res = BenchResult(kind="offline", env=capture_env(), model=opts.model, dtype=_resolved_dtype(opts),
                      engine_args=dict(opts.engine_args, dummy=opts.dummy, device=opts.device,
                                       hf_batch_size=opts.hf_batch_size, isolated_backends=isolate),
                      workload=workload.name, seed=opts.seed,
                      quantization=opts.engine_args.get("quantization"))
    for name in backends:
        try:
            if isolate:
                from tachyon.bench.isolated import run_backend_isolated

                run = run_backend_isolated(name, opts, workload, warmup, repeats, warmup_max_tokens)
            else:
                run = run_backend(name, opts, workload, warmup, log, repeats, warmup_max_tokens)
        except Exception as e:  # one broken backend must not lose the others' numbers
            if len(backends) == 1:
                raise
            res.warnings.append(f"{name}: failed: {type(e).__name__}: {e}"[:500])
            log(f"[{name}] FAILED: {type(e).__name__}: {e}")
            continue
        res.runs.append(run)
        if not run.summary.extra.get("exact_output_tokens"):
            res.warnings.append(f"{name}: produced {run.summary.output_tokens} output tokens, "
                                f"expected {workload.output_tokens}")
    return res
