"""Matplotlib charts as PNG bytes (Agg backend, no display): latency vs throughput, percentile bars,
offline speed-up. Contract: `make_charts(result)` returns {name: png_bytes} for the charts that
apply to this result (a sweep with >= 2 points gets the latency curve; offline gets speed-up)."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from tachyon.bench.schema import BenchResult, Run  # noqa: E402

_METRICS = (("ttft", "TTFT"), ("tpot", "TPOT"), ("e2e", "E2E"))


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()


def _series(runs: list[Run]) -> dict[str, list[Run]]:
    """Ladder points and max-rate probes are separate curves (labels `probeN:...` are probes)."""
    groups: dict[str, list[Run]] = {}
    for r in runs:
        groups.setdefault("max-rate probes" if r.label.startswith("probe") else "ladder", []).append(r)
    return {k: sorted(v, key=lambda r: r.summary.output_throughput) for k, v in groups.items()}


def latency_vs_throughput(runs: list[Run]) -> bytes:
    series = _series(runs)
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for ax, (key, name) in zip(axes, _METRICS, strict=True):
        for si, (sname, pts) in enumerate(series.items()):
            x = [r.summary.output_throughput for r in pts]
            for q, style in (("p50", "o-"), ("p99", "s--")):
                y = [getattr(getattr(r.summary, key), q) for r in pts]
                y = [v * 1e3 if v is not None else float("nan") for v in y]
                label = f"{q}" if len(series) == 1 else f"{sname} {q}"
                ax.plot(x, y, style, color=f"C{2 * si + (q == 'p99')}", label=label)
        slo = runs[-1].summary.slo
        bound = getattr(slo, f"{key}_s", None) if slo else None
        if bound:
            ax.axhline(bound * 1e3, color="red", lw=1, ls=":", label="SLO")
        ax.set_xlabel("output tokens/s")
        ax.set_ylabel(f"{name} (ms)")
        ax.set_title(f"{name} vs throughput")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return _png(fig)


def percentile_bars(runs: list[Run]) -> bytes:
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    width = 0.8 / max(1, len(runs))
    for ax, (key, name) in zip(axes, _METRICS, strict=True):
        for i, r in enumerate(runs):
            st = getattr(r.summary, key)
            vals = [(getattr(st, q) or 0.0) * 1e3 for q in ("p50", "p90", "p99")]
            ax.bar([j + i * width for j in range(3)], vals, width, label=r.label)
        ax.set_xticks([j + width * (len(runs) - 1) / 2 for j in range(3)], ["p50", "p90", "p99"])
        ax.set_ylabel(f"{name} (ms)")
        ax.set_title(f"{name} percentiles")
        ax.grid(alpha=0.3, axis="y")
    axes[0].legend(fontsize=7)
    return _png(fig)


def speedup_bars(runs: list[Run]) -> bytes:
    fig, ax = plt.subplots(figsize=(7, 3.8))
    vals = [r.summary.output_throughput for r in runs]
    bars = ax.bar([r.label for r in runs], vals, color=["#888888"] + ["#1f77b4"] * (len(runs) - 1))
    for b, v in zip(bars, vals, strict=True):
        ax.annotate(f"{v:.1f} tok/s\n{v / vals[0]:.2f}x" if vals[0] else f"{v:.1f}",
                    (b.get_x() + b.get_width() / 2, v), ha="center", va="bottom", fontsize=8)
    ax.set_ylabel("output tokens/s")
    ax.set_title("offline throughput (ratio vs first backend)")
    ax.set_ylim(0, max(vals + [1e-9]) * 1.25)
    ax.grid(alpha=0.3, axis="y")
    return _png(fig)


def make_charts(res: BenchResult) -> dict[str, bytes]:
    charts: dict[str, bytes] = {}
    runs = [r for r in res.runs if r.summary.num_ok]
    if not runs:
        return charts
    if res.kind == "offline":
        charts["speedup"] = speedup_bars(runs)
    if len(runs) >= 2 and res.kind != "offline":
        charts["latency_vs_throughput"] = latency_vs_throughput(runs)
    charts["percentiles"] = percentile_bars(runs)
    return charts
