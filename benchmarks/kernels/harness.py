"""Settings, timing and result rows shared by run_all.py's benchmarks (and attn_kv_fp8.py).

Import it before anything that loads triton: it reads `--smoke` from sys.argv at import and then sets
TRITON_INTERPRET=1 (CPU, fp32, tiny shapes, host timing, no graphs). Rows accumulate in ROWS (one per
timed kernel and shape), launch-config sweep results in SWEEP; both are module state, one run per process.
"""

import json
import os
import sys
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SMOKE = "--smoke" in sys.argv
if SMOKE:
    os.environ["TRITON_INTERPRET"] = "1"
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from timing import eager_time_us, graph_time_us  # noqa: E402

BW, FLOPS = 4.25e12, 778e12  # H200 bytes/s and dense bf16 FLOP/s: the floor's denominators
HQ, HKV, D, HIDDEN, INTER, VOCAB, PAGE = 28, 4, 128, 3584, 18944, 152064, 16  # Qwen2.5-7B
if SMOKE:
    HQ, HKV, D, HIDDEN, INTER, VOCAB = 4, 2, 32, 64, 96, 300
DEV = "cpu" if SMOKE else "cuda"
DT = torch.float32 if SMOKE else torch.bfloat16
ROWS: list[dict] = []
SWEEP: list[dict] = []
PARTIAL: list[Path] = []  # where rows are dumped as they come (survives a timeout)


def bench(fn) -> float:
    """Median time in microseconds (triton.testing.do_bench on GPU, a few host-timed runs on CPU)."""
    return eager_time_us(fn, warmup=25, rep=100, smoke=SMOKE)


def bench_graph(fn, reps: int = 10) -> float | None:
    """Per-call time of `reps` calls replayed from one CUDA graph; None in smoke mode or if capture fails."""
    return graph_time_us(fn, reps, smoke=SMOKE)


def record(kernel: str, shape: str, fn, nbytes: float, flops: float, err: float, tol: float,
           ref_fn=None, **extra) -> None:
    """Time `fn` eager and in a graph against its floor max(nbytes / BW, flops / FLOPS); append a row
    (ok = err <= tol; ref_time_us when `ref_fn` is given; `extra` as further fields) to ROWS, rewrite every
    PARTIAL file with all rows so far, print one line."""
    t = bench(fn)
    tg = bench_graph(fn)
    best = min(t, tg) if tg else t
    floor = max(nbytes / BW, flops / FLOPS) * 1e6
    row = dict(kernel=kernel, shape=shape, time_us=t, graph_us=tg, floor_us=floor, pct_of_floor=100 * floor / best,
               bound="flops" if flops / FLOPS > nbytes / BW else "memory", bytes=nbytes, flops=flops,
               rel_err=err, ok=bool(err <= tol), **extra)
    if ref_fn is not None:
        row["ref_time_us"] = bench(ref_fn)
    ROWS.append(row)
    for p in PARTIAL:
        p.write_text(json.dumps(ROWS, indent=1))
    gs = f"{tg:9.1f}" if tg else "        -"
    print(f"{kernel:18s} {shape:34s} {t:9.1f} us graph {gs} us floor {floor:8.1f} us err {err:.2e}", flush=True)


def guarded(fn):
    """Decorator: an exception in `fn` prints its traceback and appends an error row
    (kernel = fn's name, shape = its positional args, ok False) to ROWS instead of stopping the run."""
    def run(*a, **k):
        try:
            fn(*a, **k)
        except Exception as e:  # keep going: one broken kernel must not hide the others
            traceback.print_exc()
            ROWS.append(dict(kernel=fn.__name__, shape=str(a), error=repr(e)[:500], ok=False))
    return run
