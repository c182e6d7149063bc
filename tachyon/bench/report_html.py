"""One self-contained HTML report: inline CSS, charts as base64 PNG, no scripts or fonts from outside.

A small inline script marks the page when every chart image has decoded
(`<body data-charts="drawn N/N">`), which the headless-browser test reads.
"""

from __future__ import annotations

import base64
import html

from tachyon.bench import tables
from tachyon.bench.charts import make_charts
from tachyon.bench.schema import BenchResult

_CSS = """body{font-family:system-ui,sans-serif;margin:24px;color:#222}
table{border-collapse:collapse;margin:8px 0 20px;font-size:13px}
th,td{border:1px solid #ccc;padding:4px 8px;text-align:right}th{background:#f0f0f0}
td:first-child,th:first-child{text-align:left}img.chart{max-width:100%;border:1px solid #ddd;margin:8px 0}
.warn{color:#a60}"""

_SCRIPT = """window.addEventListener('load',function(){var im=document.querySelectorAll('img.chart');
var ok=0;im.forEach(function(i){if(i.complete&&i.naturalWidth>0)ok++;});
document.body.setAttribute('data-charts',(ok===im.length?'drawn ':'missing ')+ok+'/'+im.length);});"""


def _table(head: list[str], rows: list[list[str]]) -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    trs = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{th}</tr>{trs}</table>"


def render_html(res: BenchResult, charts: dict[str, bytes] | None = None) -> str:
    charts = make_charts(res) if charts is None else charts
    title = f"Tachyon benchmark: {res.kind} — {res.model or 'default model'}"
    body = [f"<h1>{html.escape(title)}</h1>"]
    if res.workload:
        body.append(f"<p>workload <b>{html.escape(res.workload)}</b></p>")
    if res.kind == "offline" and res.runs:
        body += ["<h2>Speed-up (ratios against the first backend)</h2>", _table(*tables.speedup_table(res))]
    body += ["<h2>Runs</h2>", _table(*tables.runs_table(res))]
    if res.analysis:
        body += ["<h2>Analysis</h2>", _table(["item", "value"], tables.analysis_rows(res))]
    if res.warnings:
        body += ["<h2>Warnings</h2><ul>"] + [f"<li class=warn>{html.escape(w)}</li>" for w in res.warnings]
        body.append("</ul>")
    if charts:
        body.append("<h2>Charts</h2>")
    for name, png in charts.items():
        b64 = base64.b64encode(png).decode()
        body.append(f'<div><img class="chart" alt="{html.escape(name)}" '
                    f'src="data:image/png;base64,{b64}"></div>')
    body += ["<h2>Environment</h2>", _table(["item", "value"], tables.env_rows(res))]
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{_CSS}</style><script>{_SCRIPT}</script></head><body data-charts='pending'>"
            + "\n".join(body) + "</body></html>\n")
