"""Reports: Markdown + one self-contained HTML whose charts all draw in headless Chromium."""

import argparse
import shutil
import subprocess

import pytest

from tachyon.bench import cli as bench_cli
from tachyon.bench.datasets import random_requests
from tachyon.bench.env import capture_env
from tachyon.bench.fake_server import FakeServer
from tachyon.bench.metrics import make_slo
from tachyon.bench.schema import BenchResult, save_result
from tachyon.bench.serve import LoadConfig
from tachyon.bench.sweep import run_ladder

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-default-apps", "--disable-extensions", "--disable-sync",
         "--no-first-run", "--mute-audio", "--hide-scrollbars", "--disable-dev-shm-usage"]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    d = tmp_path_factory.mktemp("report")
    s = FakeServer(ttft_s=0.01, tpot_s=0.004, max_batch=2)
    url = s.start()
    try:
        runs = run_ladder(LoadConfig(url, "m"), random_requests(8, 8, 8, seed=1), [1, 2, 4], "concurrency",
                          make_slo("interactive"), log=lambda m: None)
    finally:
        s.stop()
    res = BenchResult(kind="sweep", env=capture_env(), model="fake", workload="random", runs=runs,
                      analysis={"knee": runs[1].label})
    path = save_result(res, d / "sweep.json")
    p = argparse.ArgumentParser()
    bench_cli.register(p.add_subparsers(dest="command", required=True))
    args = p.parse_args(["bench", "report", str(path)])
    assert args.func(args) == 0
    return d


def test_markdown_and_html_are_self_contained(report):
    md = (report / "sweep.md").read_text()
    assert "| run |" in md and "![latency_vs_throughput](sweep_latency_vs_throughput.png)" in md
    assert (report / "sweep_latency_vs_throughput.png").read_bytes()[:4] == b"\x89PNG"
    page = (report / "sweep.html").read_text()
    assert page.count('<img class="chart"') == 2 and "data:image/png;base64," in page
    assert "http://" not in page and "https://" not in page and "<script src" not in page


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install -y chromium)")
def test_html_renders_every_chart_in_headless_chromium(report, tmp_path):
    html = report / "sweep.html"
    dom = subprocess.run([CHROMIUM, *FLAGS, "--virtual-time-budget=3000", "--dump-dom", html.as_uri()],
                         capture_output=True, text=True, timeout=90)
    assert 'data-charts="drawn 2/2"' in dom.stdout, dom.stderr[-2000:]
    shot = tmp_path / "shot.png"
    subprocess.run([CHROMIUM, *FLAGS, f"--screenshot={shot}", "--window-size=1200,2000", html.as_uri()],
                   capture_output=True, timeout=90)
    from PIL import Image

    img = Image.open(shot).convert("L")
    px = list(img.tobytes())
    mean = sum(px) / len(px)
    var = sum((p - mean) ** 2 for p in px) / len(px)
    assert img.size == (1200, 2000) and var > 100, f"screenshot looks blank (variance {var:.1f})"
    assert sum(p < 128 for p in px) > 5000  # drawn lines, bars and text
