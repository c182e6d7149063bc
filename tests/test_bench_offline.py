"""`bench offline` on the tiny model: hf and tachyon backends, exact token counts, one table + report."""

import argparse
import json

import pytest

from tachyon.bench import cli as bench_cli
from tachyon.bench.backends import BackendOptions
from tachyon.bench.offline import run_offline
from tachyon.bench.shapes import resolve_shape, shape_dir
from tachyon.bench.workloads import builtin_workloads, load_workload


def tachyon_engine_available() -> bool:
    try:
        import tachyon.engine.llm  # noqa: F401
    except ImportError:
        return False
    return True


def run_cli(argv):
    p = argparse.ArgumentParser()
    bench_cli.register(p.add_subparsers(dest="command", required=True))
    args = p.parse_args(argv)
    return args.func(args)


def test_builtin_workloads_match_benchmarks_md():
    assert {"seed8", "bs1", "nano256"} <= set(builtin_workloads())
    seed8 = load_workload("seed8")
    assert len(seed8.requests) == 8 and seed8.output_tokens == 2048
    assert (seed8.temperature, seed8.top_p) == (0.7, 0.9)
    bs1 = load_workload("bs1")
    assert [len(r.prompt_token_ids) for r in bs1.requests] == [128] and bs1.output_tokens == 256
    assert bs1.temperature == 0.0
    nano = load_workload("nano256")
    assert (len(nano.requests), nano.input_tokens, nano.output_tokens) == (256, 142616, 142445)


def test_builtin_shapes():
    q7 = resolve_shape("qwen2.5-7b")
    assert round(q7.num_params() / 1e9, 2) == 7.62
    assert round(q7.decode_read_params() * 2 / 1e9, 1) == 14.1  # BENCHMARKS.md: ~14.1 GB per step
    assert round(resolve_shape("Qwen3-0.6B").num_params() / 1e9, 2) == 0.60
    assert json.loads((__import__("pathlib").Path(shape_dir("qwen3-0.6b")) / "config.json").read_text())[
        "num_key_value_heads"] == 8


def test_hf_backend_exact_tokens_dummy_and_real(tiny_llama):
    wl = load_workload("seed8").clamp_vocab(49152).truncated(num_requests=3, max_tokens=5)
    for dummy in (False, True):
        res = run_offline(["hf"], BackendOptions(model=tiny_llama, dummy=dummy, hf_batch_size=2), wl,
                          warmup=False, log=lambda m: None)
        run = res.runs[0]
        assert run.summary.output_tokens == 15 and run.summary.extra["exact_output_tokens"]
        assert [r.output_tokens for r in run.requests] == [5, 5, 5]
        assert run.summary.ttft.n == 3 and run.summary.tpot.n == 3 and not res.warnings


def test_vllm_backend_reports_missing_vllm():
    pytest.importorskip("torch")
    try:
        import vllm  # noqa: F401
    except ImportError:
        from tachyon.bench.backends import get_backend

        with pytest.raises(RuntimeError, match="vLLM"):
            get_backend("vllm", BackendOptions(model="x")).load()
    with pytest.raises(ValueError):
        from tachyon.bench.backends import get_backend

        get_backend("nope", BackendOptions(model="x"))


@pytest.mark.skipif(not tachyon_engine_available(), reason="tachyon.engine.llm not importable yet")
def test_offline_hf_and_tachyon_one_table(tiny_llama, tmp_path):
    out = tmp_path / "offline.json"
    rc = run_cli(["bench", "offline", "--backend", "hf,tachyon", "--model", tiny_llama, "--workload", "seed8",
                  "--clamp-vocab", "49152", "--max-tokens", "6", "--hf-batch-size", "8", "--output", str(out),
                  "--engine-arg", "max_model_len=256", "--engine-arg", "num_kv_blocks=64",
                  "--report-dir", str(tmp_path)])
    assert rc == 0
    data = json.loads(out.read_text())
    assert [r["label"] for r in data["runs"]] == ["hf", "tachyon"]
    for r in data["runs"]:
        s = r["summary"]
        assert s["output_tokens"] == 48 and s["input_tokens"] == 179
        assert s["extra"]["exact_output_tokens"] is True
    lines = [ln for ln in out.with_name("offline.requests.jsonl").read_text().splitlines() if ln]
    assert len(lines) == 16 and all(json.loads(ln)["output_tokens"] == 6 for ln in lines)
    md = (tmp_path / "offline.md").read_text()
    assert "speed-up" in md and "| tachyon |" in md and "1.00x" in md
    assert (tmp_path / "offline_speedup.png").exists()


@pytest.mark.skipif(not tachyon_engine_available(), reason="tachyon.engine.llm not importable yet")
def test_tachyon_backend_bs1_like_weight_bandwidth(tiny_llama):
    wl = load_workload("bs1").clamp_vocab(49152).truncated(max_tokens=8)
    opts = BackendOptions(model=tiny_llama, engine_args={"max_model_len": 256, "num_kv_blocks": 32})
    res = run_offline(["tachyon"], opts, wl, warmup=False, log=lambda m: None)
    s = res.runs[0].summary
    assert s.output_tokens == 8 and s.input_tokens == 128
    assert s.ttft.n == 1 and s.tpot.n == 1 and s.extra["weight_read_gbps"] > 0
