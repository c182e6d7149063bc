"""Shared helpers of the kernel benchmark scripts: relative error, eager and CUDA-graph timing, environment,
the Markdown result table."""

from __future__ import annotations

import platform
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import torch


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    """‖out − ref‖ / ‖ref‖ in float64; NaN anywhere in `out` gives NaN (never passes a tolerance)."""
    if torch.isnan(out).any():
        return float("nan")
    return ((out.double() - ref.double()).norm() / ref.double().norm().clamp_min(1e-30)).item()


def eager_time_us(fn: Callable[[], object], warmup: int = 25, rep: int = 100, smoke: bool = False) -> float:
    """Median time of one eager call in microseconds: triton.testing.do_bench(warmup, rep) on the GPU; in smoke
    mode (CPU, interpreter) one untimed call, then one host-timed call."""
    if smoke:
        fn()
        t = time.perf_counter()
        fn()
        return (time.perf_counter() - t) * 1e6
    import triton.testing

    return triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="median") * 1e3


def graph_time_us(fn: Callable[[], object], reps: int = 10, rep_ms: int = 100, smoke: bool = False) -> float | None:
    """Median per-call time of `reps` back-to-back calls replayed from one CUDA graph (how the engine's
    decode step runs: no launch overhead, every kernel a graph node; the L2 stays warm across the
    calls). None in smoke mode, without CUDA, or when capture fails."""
    if smoke or not torch.cuda.is_available():
        return None
    import triton.testing

    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn()
            fn()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(reps):
                fn()
        torch.cuda.synchronize()
        return triton.testing.do_bench(g.replay, warmup=10, rep=rep_ms, return_mode="median") * 1e3 / reps
    except Exception as e:  # noqa: BLE001 - a failed capture only loses the timing
        print(f"graph capture failed: {e!r}"[:300], flush=True)
        return None


def env(root: Path) -> dict:
    """Python, torch, triton, GPU, CUDA, driver and git sha of this run."""
    info = dict(python=platform.python_version(), torch=torch.__version__)
    try:
        import triton

        info["triton"] = triton.__version__
    except ImportError:
        info["triton"] = None
    if torch.cuda.is_available():
        info.update(gpu=torch.cuda.get_device_name(), cuda=torch.version.cuda)
        try:
            cmd = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
            info["driver"] = subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout.strip()
        except Exception:  # noqa: BLE001
            pass
    try:
        info["git_sha"] = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                                         text=True, timeout=10).stdout.strip() or None
    except Exception:  # noqa: BLE001
        info["git_sha"] = None
    return info


def markdown(rows: list[dict]) -> str:
    head = ("| kernel | shape | eager (us) | graph (us) | floor (us) | % of floor | bound | rel err "
            "| torch ref (us) | ok |")
    lines = [head, "|---|---|---:|---:|---:|---:|---|---:|---:|---|"]
    for r in rows:
        if "time_us" not in r:
            note = r.get("tv_distance", r.get("error", ""))
            lines.append(f"| {r['kernel']} | {r['shape']} | | | | | | {note} | | {r['ok']} |")
            continue
        ref = r.get("ref_time_us", r.get("torch_sort_baseline_us"))
        g = "" if r.get("graph_us") is None else f"{r['graph_us']:.1f}"
        lines.append(f"| {r['kernel']} | {r['shape']} | {r['time_us']:.1f} | {g} | {r['floor_us']:.1f} | "
                     f"{r['pct_of_floor']:.0f}% | {r['bound']} | {r['rel_err']:.1e} | "
                     f"{'' if ref is None else f'{ref:.1f}'} | {r['ok']} |")
    return "\n".join(lines) + "\n"
