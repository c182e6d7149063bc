"""Markdown report of a `BenchResult` (tables + links to PNG charts written beside it)."""

from __future__ import annotations

from tachyon.bench import tables
from tachyon.bench.schema import BenchResult


def md_table(head: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(out)


def render_markdown(res: BenchResult, chart_files: dict[str, str] | None = None) -> str:
    parts = [f"# Tachyon benchmark: {res.kind} — {res.model or 'default model'}"
             f"{' — ' + res.workload if res.workload else ''}", ""]
    if res.kind == "offline" and res.runs:
        parts += ["## Speed-up (ratios against the first backend)", "",
                  md_table(*tables.speedup_table(res)), ""]
    parts += ["## Runs", "", md_table(*tables.runs_table(res)), ""]
    slo = next((r.summary.slo for r in res.runs if r.summary.slo), None)
    if slo:
        named = (("TTFT", slo.ttft_s), ("TPOT", slo.tpot_s), ("E2E", slo.e2e_s))
        bounds = ", ".join(f"{k} ≤ {v * 1e3:g} ms" for k, v in named if v)
        parts += [f"SLO `{slo.name}`: p{slo.percentile:g} {bounds}; "
                  "goodput counts requests meeting every bound.", ""]
    if res.analysis:
        parts += ["## Analysis", "", md_table(["item", "value"], tables.analysis_rows(res)), ""]
    if res.warnings:
        parts += ["## Warnings", ""] + [f"- {w}" for w in res.warnings] + [""]
    for name, path in (chart_files or {}).items():
        parts += [f"![{name}]({path})", ""]
    parts += ["## Environment", "", md_table(["item", "value"], tables.env_rows(res)), ""]
    return "\n".join(parts)
