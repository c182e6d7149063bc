"""benchmarks/gpu/smi_window.py: the busy stretch it picks from an nvidia-smi CSV, and the board figures the
acceptance docs quote (docs/performance.md, benchmarks/results/session39/README.md) recomputed from the committed
CSVs."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str):
    """A benchmarks/gpu script as a module, registered under its own name (as when that folder is on sys.path)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / "gpu" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


_load("clock_sampler")
smi_window = _load("smi_window")

HEADER = "timestamp, clocks.current.sm [MHz], power.draw [W], power.draw.instant [W], clocks_event_reasons.active\n"


def _row(t: int, mhz: int, watts: float, capped: bool) -> str:
    return f"2026/12/04 00:00:{t:02d}.000, {mhz} MHz, {watts:.2f} W, {watts:.2f} W, {'0x4' if capped else '0x0'}\n"


def test_last_busy_window_takes_the_last_stretch_across_short_dips(tmp_path):
    rows = [_row(0, 1980, 500.0, False), _row(1, 1980, 520.0, False)]  # transformers' stretch
    rows += [_row(2 + i, 345, 75.0, False) for i in range(12)]  # idle longer than max_gap
    rows += [_row(14, 1500, 690.0, True), _row(15, 1980, 300.0, False), _row(16, 1600, 700.0, True)]  # a dip
    rows += ["2026/12/04 00:00:17.000, [N/A], [N/A], [N/A], [N/A]\n", _row(18, 345, 75.0, False)]
    path = tmp_path / "smi.csv"
    path.write_text(HEADER + "".join(rows))
    samples = smi_window.read_samples(path)
    assert len(samples) == 18  # the [N/A] row is skipped
    window = smi_window.last_busy_window(samples, min_watts=400.0, max_gap=10)
    assert [s.timestamp[-6:] for s in window] == ["14.000", "15.000", "16.000"]
    out = smi_window.summarize(window)
    assert out["samples"] == 3 and out["sm_mhz_median"] == 1600 and out["power_capped"] == 2
    assert out["power_w_median"] == 690.0 and out["power_w_mean"] == pytest.approx(563.3, abs=0.05)
    assert smi_window.last_busy_window(samples, min_watts=800.0) == []
    assert smi_window.summarize([]) == {"samples": 0}


@pytest.mark.parametrize("folder, mhz, capped, tok_s_per_mhz", [
    ("session39/acceptance_6b0536c_call1", 1575, 92, 9.51),
    ("session39/acceptance_6b0536c_call4", 1515, 95, 9.63),
    ("session39/acceptance_0eaa37b_call6", 1575, 92, 9.49),
    ("session38/acceptance_6b56fec", 1590, 92, 9.48),
    ("session40/acceptance_8945359_call2", 1545, 93, 9.61),  # a sixth column (GPU temperature) since stop 48
])
def test_committed_acceptance_boards_match_the_docs(folder, mhz, capped, tok_s_per_mhz, capsys):
    d = ROOT / "benchmarks" / "results" / folder
    smi_window.main([str(d / "smi_nano_7b.csv"), "--bench", str(d / "offline" / "nano256_qwen2.5-7b.json")])
    out = json.loads(capsys.readouterr().out)
    assert (out["sm_mhz_median"], out["power_capped"], out["tok_s_per_mhz"]) == (mhz, capped, tok_s_per_mhz)
