"""Report tables as plain rows (header + list of string rows), shared by the Markdown and HTML reports."""

from __future__ import annotations

from tachyon.bench.schema import BenchResult, Stats


def _ms(s: Stats, key: str) -> str:
    v = getattr(s, key)
    return "-" if v is None else f"{v * 1e3:.1f}"


def _num(v: float | None, fmt: str = "{:.1f}") -> str:
    return "-" if v is None else fmt.format(v)


def runs_table(res: BenchResult) -> tuple[list[str], list[list[str]]]:
    head = ["run", "ok/total", "req/s", "output tok/s", "total tok/s", "TTFT p50 / p99 ms",
            "TPOT p50 / p99 ms", "ITL p50 ms", "E2E p50 / p99 ms", "error rate", "goodput req/s"]
    rows = []
    for r in res.runs:
        s = r.summary
        rows.append([r.label, f"{s.num_ok}/{s.num_requests}", f"{s.request_throughput:.2f}",
                     f"{s.output_throughput:.1f}", f"{s.total_throughput:.1f}",
                     f"{_ms(s.ttft, 'p50')} / {_ms(s.ttft, 'p99')}",
                     f"{_ms(s.tpot, 'p50')} / {_ms(s.tpot, 'p99')}",
                     _ms(s.itl_pooled, "p50"), f"{_ms(s.e2e, 'p50')} / {_ms(s.e2e, 'p99')}",
                     f"{s.error_rate:.1%}", _num(s.goodput, "{:.2f}")])
    return head, rows


def speedup_table(res: BenchResult) -> tuple[list[str], list[list[str]]]:
    """Offline: throughput per backend and the ratio against the first backend."""
    head = ["backend", "output tokens", "exact", "output tok/s", "total tok/s", "req/s", "speed-up",
            "TTFT mean ms", "TPOT mean ms", "peak GPU GB", "energy J", "tok/J", "weight GB/s"]
    rows = []
    base = res.runs[0].summary.output_throughput if res.runs else 0.0
    for r in res.runs:
        s, x = r.summary, r.summary.extra
        rows.append([r.label, str(s.output_tokens), "yes" if x.get("exact_output_tokens") else "NO",
                     f"{s.output_throughput:.1f}", f"{s.total_throughput:.1f}", f"{s.request_throughput:.3f}",
                     f"{s.output_throughput / base:.2f}x" if base else "-", _ms(s.ttft, "mean"),
                     _ms(s.tpot, "mean"), _num(x.get("peak_gpu_mem_gb"), "{:.2f}"), _num(x.get("energy_j")),
                     _num(x.get("tokens_per_joule"), "{:.2f}"), _num(x.get("weight_read_gbps"))])
    return head, rows


def env_rows(res: BenchResult) -> list[list[str]]:
    e = res.env
    items = [("model", res.model), ("quantization", res.quantization), ("dtype", res.dtype),
             ("workload", res.workload), ("seed", res.seed), ("GPU", e.gpu and f"{e.gpu} x{e.gpu_count}"),
             ("driver", e.driver), ("CUDA", e.cuda), ("torch", e.torch), ("triton", e.triton),
             ("transformers", e.transformers), ("vllm", e.vllm), ("tachyon", e.tachyon),
             ("git", e.git_sha and (e.git_sha[:12] + (" (dirty)" if e.git_dirty else ""))),
             ("source digest", e.source_digest),
             ("CPU", e.cpu), ("python", e.python), ("created", res.created),
             ("engine args", ", ".join(f"{k}={v}" for k, v in sorted(res.engine_args.items())) or None),
             ("knobs", ", ".join(f"{k}={v}" for k, v in e.knobs.items()) or None)]
    return [[k, str(v)] for k, v in items if v not in (None, "")]


def analysis_rows(res: BenchResult) -> list[list[str]]:
    return [[k, f"{v:.3g}" if isinstance(v, float) else str(v)] for k, v in res.analysis.items()]
