"""`bench compare`: an injected 20% slowdown is flagged (exit 1); two runs of one config pass."""

import argparse

import pytest

from tachyon.bench import cli as bench_cli
from tachyon.bench.compare import bootstrap_ratio, compare_results
from tachyon.bench.datasets import random_requests
from tachyon.bench.env import capture_env
from tachyon.bench.fake_server import FakeServer
from tachyon.bench.schema import BenchResult, save_result
from tachyon.bench.serve import LoadConfig, run_point

REQS = random_requests(12, 16, 12, seed=7)


def measure(slow: float, tmp_path, name: str):
    s = FakeServer(ttft_s=0.12 * slow, tpot_s=0.03 * slow, max_batch=4)
    url = s.start()
    try:
        run_point(LoadConfig(url, "m", process="closed", concurrency=4), REQS[:4])  # warm-up, not measured
        run = run_point(LoadConfig(url, "m", process="closed", concurrency=4), REQS)
    finally:
        s.stop()
    res = BenchResult(kind="serve", env=capture_env(), model="fake", runs=[run], seed=0)
    return save_result(res, tmp_path / f"{name}.json")


def run_cli(argv):
    p = argparse.ArgumentParser()
    bench_cli.register(p.add_subparsers(dest="command", required=True))
    args = p.parse_args(argv)
    return args.func(args)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    d = tmp_path_factory.mktemp("cmp")
    return measure(1.0, d, "base"), measure(1.0, d, "same"), measure(1.2, d, "slow")


def test_same_config_passes(results):
    base, same, _ = results
    assert run_cli(["bench", "compare", str(base), str(same)]) == 0


def test_injected_slowdown_flagged(results, capsys):
    base, _, slow = results
    assert run_cli(["bench", "compare", str(base), str(slow)]) == 1
    out = capsys.readouterr()
    assert "REGRESSION" in out.err and "e2e_mean" in out.err
    # improvement direction is not a regression
    assert run_cli(["bench", "compare", str(slow), str(base)]) == 0


def test_bootstrap_paired_exact_scaling():
    base = {str(i): 0.1 + 0.01 * i for i in range(30)}
    new = {k: v * 1.2 for k, v in base.items()}
    ratio, lo, hi = bootstrap_ratio(base, new, "mean", n_boot=200)
    assert ratio == pytest.approx(1.2) and lo == pytest.approx(1.2) and hi == pytest.approx(1.2)
    other = {f"x{i}": v for i, v in enumerate(base.values())}  # unpaired: CI has width
    _, lo2, hi2 = bootstrap_ratio(base, {k: v * 1.2 for k, v in other.items()}, "p50", n_boot=200)
    assert lo2 < 1.2 < hi2


def test_compare_requires_common_runs():
    a = BenchResult(kind="serve", runs=[])
    with pytest.raises(ValueError):
        compare_results(a, a)
