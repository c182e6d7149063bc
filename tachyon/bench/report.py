"""`bench report`: write report.md, report.html and the PNG charts of one result into a folder."""

from __future__ import annotations

from pathlib import Path

from tachyon.bench.charts import make_charts
from tachyon.bench.report_html import render_html
from tachyon.bench.report_md import render_markdown
from tachyon.bench.schema import BenchResult


def write_reports(res: BenchResult, out_dir: str | Path, stem: str = "report") -> dict[str, Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    charts = make_charts(res)
    files: dict[str, Path] = {}
    for name, png in charts.items():
        p = out / f"{stem}_{name}.png"
        p.write_bytes(png)
        files[name] = p
    md = out / f"{stem}.md"
    md.write_text(render_markdown(res, {k: v.name for k, v in files.items()}))
    page = out / f"{stem}.html"
    page.write_text(render_html(res, charts))
    return {"markdown": md, "html": page, **files}
