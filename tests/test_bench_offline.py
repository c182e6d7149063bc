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
    state = res.runs[0].config["engine_state"]  # what the start-up decided travels with the result
    assert state["num_kv_blocks"] == 32 and state["kv_cache_tokens"] == 32 * 16
    assert set(state["startup_s"]) >= {"load_s", "warmup_s", "kv_and_graphs_s", "total_s"}
    detail = state["startup_detail"]  # the last phase's parts: on CPU the cache alone, no graph captured
    assert set(detail) == {"kv_alloc_s", "num_graphs", "eager_runs", "warmup"} and detail["num_graphs"] == {}
    assert 0 <= detail["kv_alloc_s"] <= state["startup_s"]["kv_and_graphs_s"]
    assert "kv_budget_bytes" not in state  # the memory profile sizes the cache on a GPU only


@pytest.mark.skipif(not tachyon_engine_available(), reason="tachyon.engine.llm not importable yet")
def test_tachyon_backend_runs_compute_every_prompt(tiny_llama):
    """With prefix caching on, a run is not served from the prompts an earlier run (a warm-up, a repeat) left in
    the cache: each computes its prompts as the baselines do."""
    from tachyon.bench.backends import get_backend

    wl = load_workload("bs1").clamp_vocab(49152).truncated(max_tokens=4)
    backend = get_backend("tachyon", BackendOptions(model=tiny_llama, engine_args={"max_model_len": 256,
                                                                                "enable_prefix_caching": True}))
    backend.load()
    try:
        eng = backend.llm.engine
        assert eng.config.enable_prefix_caching
        for _ in range(3):
            backend.run(wl)
        stats = eng.stats()
        assert stats.prefix_cache_queries >= 3 * 128 and stats.prefix_cache_hits == 0
        assert backend.llm.generate([list(wl.requests[0].prompt_token_ids)], use_tqdm=False)[0].num_cached_tokens > 0
    finally:
        backend.close()


class _PacedBackend:
    """A backend whose successive timed runs take the given durations (s), after one untimed warm-up run (its
    workload kept in `warmed`). The short run emits one token less than asked when `short` names its index."""

    name = "paced"
    warmup_requests = 4

    def __init__(self, durations, short=None):
        self.durations, self.short, self.timed, self.warmed = list(durations), short, 0, None

    def load(self):
        pass

    def run(self, wl):
        from tachyon.bench.backends.base import BackendRun, record

        if self.warmed is None:  # warm-up: untimed
            self.warmed = wl
            return BackendRun(records=[], duration_s=0.0)
        dur = self.durations[self.timed]
        lose = 1 if self.short == self.timed else 0
        self.timed += 1
        recs = [record(i, len(r.prompt_token_ids), r.max_tokens, r.max_tokens - lose, dur / 4, dur, dur)
                for i, r in enumerate(wl.requests)]
        return BackendRun(records=recs, duration_s=dur)

    def info(self):
        return {}

    def close(self):
        pass


@pytest.mark.parametrize("durations, chosen", [([2.0, 1.0, 4.0], 0), ([1.0, 3.0, 2.0, 4.0], 1), ([5.0], 0)])
def test_repeats_report_the_median_run_and_keep_every_run(monkeypatch, durations, chosen):
    """The reported run is one real run, the median by throughput (the slower of the middle two for an even
    count), and every run's throughput is listed."""
    import tachyon.bench.offline as offline

    backend = _PacedBackend(durations)
    monkeypatch.setattr(offline, "get_backend", lambda name, opts: backend)
    wl = load_workload("seed8").truncated(num_requests=2, max_tokens=10)
    res = offline.run_offline(["paced"], BackendOptions(model=None), wl, repeats=len(durations), log=lambda m: None)
    s = res.runs[0].summary
    assert backend.timed == len(durations)
    assert s.duration_s == pytest.approx(durations[chosen])
    assert s.output_throughput == pytest.approx(20 / durations[chosen])
    assert s.extra["exact_output_tokens"] is True
    if len(durations) == 1:
        assert "repeats" not in s.extra
    else:
        assert s.extra["repeat_chosen"] == chosen
        assert [r["output_tok_s"] for r in s.extra["repeats"]] == pytest.approx([20 / d for d in durations])


def test_warmup_runs_the_first_requests_at_full_length(monkeypatch):
    """The warm-up reaches every output length the first four requests will reach when timed (not 4 tokens)."""
    import tachyon.bench.offline as offline

    backend = _PacedBackend([1.0])
    monkeypatch.setattr(offline, "get_backend", lambda name, opts: backend)
    wl = load_workload("nano256")
    offline.run_offline(["paced"], BackendOptions(model=None), wl.truncated(num_requests=6), log=lambda m: None)
    assert [r.max_tokens for r in backend.warmed.requests] == [r.max_tokens for r in wl.requests[:4]]
    assert [r.prompt_token_ids for r in backend.warmed.requests] == [r.prompt_token_ids for r in wl.requests[:4]]
    assert max(r.max_tokens for r in backend.warmed.requests) > 4
    capped = _PacedBackend([1.0])
    monkeypatch.setattr(offline, "get_backend", lambda name, opts: capped)
    res = offline.run_offline(["paced"], BackendOptions(model=None), wl.truncated(num_requests=6),
                              warmup_max_tokens=7, log=lambda m: None)
    assert [r.max_tokens for r in capped.warmed.requests] == [min(7, r.max_tokens) for r in wl.requests[:4]]
    assert res.runs[0].summary.extra["warmup_max_tokens"] == 7
    with pytest.raises(ValueError, match="warmup_max_tokens must be at least 1"):
        offline.run_offline(["paced"], BackendOptions(model=None), wl, warmup_max_tokens=0)
    with pytest.raises(SystemExit, match="--warmup-max-tokens must be at least 1, got 0"):
        run_cli(["bench", "offline", "--backend", "tachyon", "--model", "x", "--warmup-max-tokens", "0"])


def test_a_static_batch_backend_warms_up_one_whole_batch(monkeypatch):
    """The warm-up runs as many requests as the backend asks for: plain transformers one whole static batch (its
    first run at a new batch shape is the slow one), the others four."""
    import tachyon.bench.offline as offline
    from tachyon.bench.backends.hf import HFBackend
    from tachyon.bench.backends.tachyon_engine import TachyonBackend

    assert HFBackend(BackendOptions(model=None, hf_batch_size=8)).warmup_requests == 8
    assert TachyonBackend(BackendOptions(model=None)).warmup_requests == 4
    backend = _PacedBackend([1.0])
    backend.warmup_requests = 6
    monkeypatch.setattr(offline, "get_backend", lambda name, opts: backend)
    wl = load_workload("nano256").truncated(num_requests=10)
    offline.run_offline(["paced"], BackendOptions(model=None), wl, log=lambda m: None)
    assert [r.max_tokens for r in backend.warmed.requests] == [r.max_tokens for r in wl.requests[:6]]


def test_repeats_exactness_covers_every_run(monkeypatch):
    """A repeat that lost a token makes the result inexact even when the reported run is exact."""
    import tachyon.bench.offline as offline

    backend = _PacedBackend([1.0, 2.0, 3.0], short=0)  # the fastest run is short; the median (2.0 s) is exact
    monkeypatch.setattr(offline, "get_backend", lambda name, opts: backend)
    wl = load_workload("seed8").truncated(num_requests=2, max_tokens=10)
    res = offline.run_offline(["paced"], BackendOptions(model=None), wl, repeats=3, log=lambda m: None)
    assert res.runs[0].summary.extra["repeat_chosen"] == 1
    assert res.runs[0].summary.extra["exact_output_tokens"] is False
    assert any("expected" in w for w in res.warnings)


def test_repeats_must_be_positive(monkeypatch):
    import tachyon.bench.offline as offline

    with pytest.raises(ValueError, match="repeats must be at least 1, got 0"):
        offline.run_backend("paced", BackendOptions(model=None), load_workload("bs1"), repeats=0)
    loaded = []
    monkeypatch.setattr(offline, "get_backend", lambda name, opts: loaded.append(name))
    with pytest.raises(ValueError, match="repeats must be at least 1, got 0"):  # not one warning per backend
        offline.run_offline(["paced", "paced"], BackendOptions(model=None), load_workload("bs1"), repeats=0)
    assert loaded == []
    with pytest.raises(SystemExit, match="--repeats must be at least 1, got -2"):
        run_cli(["bench", "offline", "--backend", "tachyon", "--model", "x", "--repeats", "-2"])


@pytest.mark.skipif(not tachyon_engine_available(), reason="tachyon.engine.llm not importable yet")
def test_offline_repeats_on_the_engine(tiny_llama, tmp_path):
    out = tmp_path / "rep.json"
    rc = run_cli(["bench", "offline", "--backend", "tachyon", "--model", tiny_llama, "--workload", "bs1",
                  "--clamp-vocab", "49152", "--max-tokens", "5", "--repeats", "3", "--output", str(out),
                  "--engine-arg", "max_model_len=256", "--engine-arg", "num_kv_blocks=32"])
    assert rc == 0
    s = json.loads(out.read_text())["runs"][0]["summary"]
    reps = s["extra"]["repeats"]
    assert len(reps) == 3 and s["extra"]["exact_output_tokens"] is True
    assert s["output_throughput"] == pytest.approx(sorted(r["output_tok_s"] for r in reps)[1])
    assert s["output_throughput"] == pytest.approx(reps[s["extra"]["repeat_chosen"]]["output_tok_s"])


def test_short_single_runs_get_a_repeat_hint(monkeypatch):
    import tachyon.bench.offline as offline

    wl = load_workload("seed8").truncated(num_requests=2, max_tokens=10)
    for durations, repeats, hinted in (([0.2], 1, True), ([2.0], 1, False), ([0.2, 0.3, 0.25], 3, False)):
        monkeypatch.setattr(offline, "get_backend", lambda name, opts, d=durations: _PacedBackend(d))
        lines = []
        offline.run_offline(["paced"], BackendOptions(model=None), wl, repeats=repeats, log=lines.append)
        assert any("--repeats 5" in ln for ln in lines) == hinted, (durations, lines)


@pytest.mark.skipif(not tachyon_engine_available(), reason="tachyon.engine.llm not importable yet")
def test_tachyon_backend_freezes_the_heap_for_its_runs(tiny_llama):
    """The loaded engine's objects sit in the collector's permanent generation during the timed runs (no collection
    rescans them), and closing the backend gives them back, so a dropped engine's reference cycles are collected."""
    import gc
    import weakref

    from tachyon.bench.backends import get_backend

    before = gc.get_freeze_count()  # 0 on Python 3.10-3.11; 3.12's interpreter starts with ~375 objects frozen
    backend = get_backend("tachyon", BackendOptions(model=tiny_llama,
                                                    engine_args={"max_model_len": 256, "num_kv_blocks": 32}))
    backend.load()
    try:
        engine = backend.llm.engine
        assert gc.get_freeze_count() > before + 1000
        assert not any(o is engine for o in gc.get_objects())  # frozen: in no generation the collector scans
        cycle = [engine]
        cycle.append(cycle)  # made after the freeze: scanned as usual
        assert any(o is cycle for o in gc.get_objects())
    finally:
        backend.close()
    assert gc.get_freeze_count() <= before  # 3.12's collections put its immortal objects back there
    ref = weakref.ref(engine)
    engine.self_ref = engine  # a cycle through the engine, dropped below: only the collector can free it
    del engine, cycle
    gc.collect()
    assert ref() is None


@pytest.mark.skipif(not tachyon_engine_available(), reason="tachyon.engine.llm not importable yet")
def test_isolated_backends_run_each_in_its_own_process(tiny_llama):
    import os

    wl = load_workload("seed8").clamp_vocab(49152).truncated(num_requests=2, max_tokens=4)
    opts = BackendOptions(model=tiny_llama, hf_batch_size=2, engine_args={"max_model_len": 256, "num_kv_blocks": 32})
    res = run_offline(["hf", "tachyon"], opts, wl, warmup=False, log=lambda m: None, isolate=True)
    assert not res.warnings and res.engine_args["isolated_backends"] is True
    assert [r.config["backend"] for r in res.runs] == ["hf", "tachyon"]
    pids = [r.config["pid"] for r in res.runs]
    assert len(set(pids)) == 2 and os.getpid() not in pids
    for r in res.runs:  # the child's Run carries its per-request records back
        assert r.summary.output_tokens == 8 and r.summary.extra["exact_output_tokens"]
        assert [q.output_tokens for q in r.requests] == [4, 4]


def test_isolated_backend_errors_come_back(monkeypatch, tiny_llama):
    import sys

    wl = load_workload("bs1").truncated(max_tokens=2)
    opts = BackendOptions(model=tiny_llama)
    with pytest.raises(ValueError, match="unknown backend 'nope'"):  # the child's exception, its type kept
        run_offline(["nope"], opts, wl, isolate=True, log=lambda m: None)
    monkeypatch.setattr(sys, "executable", "/bin/false")  # a child that dies without writing a result
    res = run_offline(["hf", "nope"], opts, wl, isolate=True, log=lambda m: None)
    assert res.runs == [] and len(res.warnings) == 2
    assert all("child process exited with status 1 without a result" in w for w in res.warnings)


class _NotRebuildable(Exception):
    """Pickles, but cannot be unpickled (its __init__ takes two arguments, its args hold one)."""

    def __init__(self, a, b):
        super().__init__(f"{a}/{b}")


@pytest.mark.parametrize("exc, expect", [(ValueError("bad field"), ValueError),
                                         (_NotRebuildable(1, 2), RuntimeError)])
def test_isolated_child_errors_keep_type_or_text(monkeypatch, exc, expect):
    from pathlib import Path
    from types import SimpleNamespace

    from tachyon.bench import isolated, offline

    def fail(*a, **k):
        raise exc

    def child_in_process(argv, check):  # the child's code, run here: the test sees both halves of the trip
        isolated._child(Path(argv[-2]), Path(argv[-1]))
        return SimpleNamespace(returncode=0)

    monkeypatch.setattr(offline, "run_backend", fail)
    monkeypatch.setattr(isolated.subprocess, "run", child_in_process)
    with pytest.raises(expect, match="bad field" if expect is ValueError else "_NotRebuildable: 1/2"):
        isolated.run_backend_isolated("hf", BackendOptions(model=None), load_workload("bs1"))


def test_isolation_defaults_to_several_backends_on_a_gpu(monkeypatch):
    from tachyon.bench import gpu, offline

    monkeypatch.setattr(gpu, "cuda_available", lambda: True)
    assert offline.default_isolation(["hf", "tachyon"], BackendOptions(model=None))
    assert not offline.default_isolation(["tachyon"], BackendOptions(model=None))
    assert not offline.default_isolation(["hf", "tachyon"], BackendOptions(model=None, device="cpu"))
    monkeypatch.setattr(gpu, "cuda_available", lambda: False)
    assert not offline.default_isolation(["hf", "tachyon"], BackendOptions(model=None))
