"""benchmarks/long_prefill_sim.py: its replay through the engine's Scheduler against closed forms, and the figures
docs/performance.md and benchmarks/results/session53/README.md quote, recomputed from the committed data."""

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("long_prefill_sim", ROOT / "benchmarks" / "long_prefill_sim.py")
sim = importlib.util.module_from_spec(spec)
sys.modules["long_prefill_sim"] = sim
spec.loader.exec_module(sim)


def test_a_lone_long_prompt_takes_its_chunks_and_every_causal_pair():
    # 8,192 tokens in 2,048-token chunks: four steps, and causal attention over 8,192^2 / 2 (query, key) pairs in all
    steps = 4 * (1.0 + 0.0235 * 2048)
    attn = 8192 * 8192 / 2 * (4 * 28 * 3584) / (0.40 * 778e12) * 1e3
    [ttft] = sim.replay([(0.0, 8192, 1)], 0, "any")
    assert ttft == pytest.approx(steps + attn, rel=1e-9)
    [old] = sim.replay([(0.0, 8192, 1)], 0, "any", prefill_attention=False)
    assert old == pytest.approx(steps, rel=1e-9)


def test_the_cap_lets_a_short_prompt_past_a_long_prefill():
    trace = [(0.0, 8192, 4), (0.010, 300, 4)]  # the short prompt arrives during the long one's first chunk
    long_off, short_off = sim.replay(trace, 0, "shorter")
    long_on, short_on = sim.replay(trace, 512, "shorter")
    assert short_off > long_off - 10.0  # without the cap it waits for the whole prefill
    assert short_on < 0.5 * long_off  # with it, the step after the one in flight carries it
    assert long_on > long_off  # the long prompt pays for it


def _lines(argv: list[str], capsys, monkeypatch) -> list[str]:
    monkeypatch.setattr(sys, "argv", ["long_prefill_sim.py", *argv])
    sim.main()
    return capsys.readouterr().out.splitlines()


def test_the_probe_load_figures_in_the_docs(capsys, monkeypatch):
    out = _lines(["--nano256", "--num", "64", "--long-every", "8", "--seeds", "1"], capsys, monkeypatch)
    assert "short 39.4 / 96.2 / 261.7 | long 262.8" in out[1]  # seed 0, cap off (fcfs)
    assert "short 25.0 / 56.1 / 83.6" in out[3]  # cap 512, shorter-waiter rule


def test_the_server_log_replay_figures_in_the_docs(capsys, monkeypatch):
    log = ROOT / "benchmarks/results/session51/s62b_full/serve_shorter.requests.jsonl.gz"
    out = _lines(["--from-log", str(log), "--slowest", "12"], capsys, monkeypatch)
    assert "short 48.0 / 78.1 / 244.7" in out[1]  # measured through HTTP, cap on
    assert "short 34.3 / 39.5 / 212.1" in out[2] and "short 24.8 / 36.0 / 88.9" in out[4]  # model: cap off, on
    slow = {int(line.split()[0]): line.split() for line in out[6:]}
    sent_after_long = {i: float(r[-1]) for i, r in slow.items() if r[-1] != "none"}
    near = [i for i, ms in sent_after_long.items() if ms < 100]
    assert sorted(near) == [8, 128, 129, 136, 160, 250]
    assert min(sent_after_long[i] for i in near) == 47.5 and max(sent_after_long[i] for i in near) == 96.8
    capped_ok = [i for i in near if float(slow[i][7]) < 100]  # the model lets all but one past under the cap
    assert sorted(capped_ok) == [8, 128, 129, 136, 160] and float(slow[250][7]) == 206.5
    gap = [float(slow[i][3]) - float(slow[i][7]) for i in capped_ok]  # measured minus the model's cap 512
    assert min(gap) == pytest.approx(62.1, abs=0.1) and max(gap) == pytest.approx(165.6, abs=0.1)
