"""`bench offline`: run one workload through one or more backends, one after another, same settings.

Contract: `run_offline(backends, opts, workload, warmup=True)` returns a `BenchResult(kind="offline")`
with one `Run` per backend (label = backend name). Each backend: load, a short untimed warm-up,
then the timed run inside a `GpuMeter`. A backend that fails (when several run) becomes a warning,
not a lost run. `summary.extra` holds the exactness check of the output token count, load time,
peak GPU memory, energy and tokens/J, and for single-request workloads the achieved weight-read
bandwidth (bytes read per decode step / TPOT).
"""

from __future__ import annotations

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


def run_backend(name: str, opts: BackendOptions, workload: Workload, warmup: bool = True,
                log: Callable[[str], None] = print) -> Run:
    backend = get_backend(name, opts)
    t0 = time.perf_counter()
    backend.load()
    load_s = time.perf_counter() - t0
    try:
        warm_s = 0.0
        if warmup:
            t1 = time.perf_counter()
            backend.run(workload.truncated(num_requests=min(len(workload.requests), 4), max_tokens=4))
            warm_s = time.perf_counter() - t1
        log(f"[{name}] loaded in {load_s:.1f}s, warm-up {warm_s:.1f}s; running {len(workload.requests)} "
            f"requests ({workload.input_tokens} in / {workload.output_tokens} out tokens)")
        with GpuMeter() as meter:
            out = backend.run(workload)
        info = backend.info()
    finally:
        backend.close()
    summary = summarize(out.records, duration_s=out.duration_s)
    dtype = _resolved_dtype(opts)
    extra: dict = {
        "expected_output_tokens": workload.output_tokens,
        "exact_output_tokens": summary.output_tokens == workload.output_tokens
        and all(r.output_tokens == r.max_tokens for r in out.records),
        "load_s": load_s, "warmup_s": warm_s, "peak_gpu_mem_gb": meter.peak_mem_gb,
        "energy_j": meter.energy_j,
        "tokens_per_joule": (summary.output_tokens / meter.energy_j) if meter.energy_j else None,
    }
    if len(workload.requests) == 1 and summary.tpot.mean:
        wb = _weight_bytes_per_step(opts, dtype)
        extra["weight_read_gbps"] = wb / summary.tpot.mean / 1e9 if wb else None
    summary.extra = extra
    log(f"[{name}] {summary.output_throughput:.1f} output tok/s, {summary.output_tokens} tokens "
        f"({'exact' if extra['exact_output_tokens'] else 'NOT EXACT'}) in {summary.duration_s:.2f}s")
    return Run(label=name, config={"backend": name, "dtype": dtype, **info}, summary=summary,
               requests=out.records)


def run_offline(backends: list[str], opts: BackendOptions, workload: Workload, warmup: bool = True,
                log: Callable[[str], None] = print) -> BenchResult:
    res = BenchResult(kind="offline", env=capture_env(), model=opts.model, dtype=_resolved_dtype(opts),
                      engine_args=dict(opts.engine_args, dummy=opts.dummy, device=opts.device,
                                       hf_batch_size=opts.hf_batch_size),
                      workload=workload.name, seed=opts.seed,
                      quantization=opts.engine_args.get("quantization"))
    for name in backends:
        try:
            run = run_backend(name, opts, workload, warmup, log)
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
