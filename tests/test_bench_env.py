"""Environment capture: GPU 0's board identity and limits from NVML, and nothing (never an error) without it; the
TACHYON_* knobs in force."""

import os
import sys
import types

from tachyon.bench import env


def _fake_nvml(fail: set[str] = frozenset()):
    m = types.ModuleType("pynvml")
    m.NVML_CLOCK_SM, m.NVML_CLOCK_MEM = 1, 2
    answers = {"nvmlDeviceGetUUID": lambda h: f"GPU-{h[1]}".encode(), "nvmlDeviceGetSerial": lambda h: "165",
               "nvmlDeviceGetEnforcedPowerLimit": lambda h: 700000,
               "nvmlDeviceGetMaxClockInfo": lambda h, c: {1: 1980, 2: 3201}[c]}
    m.nvmlInit = lambda: None
    m.nvmlDeviceGetHandleByIndex = lambda i: ("handle", i)
    for name, fn in answers.items():
        if name in fail:
            def fn(*a, _n=name):
                raise RuntimeError(f"{_n}: not supported")
        setattr(m, name, fn)
    return m


def test_board_reads_identity_and_limits(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml())
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert env._board() == {"uuid": "GPU-0", "serial": "165", "power_limit_w": 700.0,
                            "sm_clock_max_mhz": 1980, "mem_clock_max_mhz": 3201}


def test_board_keeps_what_nvml_gives(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml({"nvmlDeviceGetSerial", "nvmlDeviceGetEnforcedPowerLimit"}))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")  # the board the run measures: the first visible one
    b = env._board()
    assert b["serial"] is None and b["power_limit_w"] is None and b["uuid"] == "GPU-3"


def test_board_without_nvml_is_none(monkeypatch):
    broken = types.ModuleType("pynvml")

    def init():
        raise OSError("libnvidia-ml.so.1: cannot open shared object file")

    broken.nvmlInit = init
    monkeypatch.setitem(sys.modules, "pynvml", broken)
    assert env._board() is None
    assert env.capture_env().gpu_board is None  # no GPU here, or no NVML: the field stays empty, never raises


def test_knobs_record_the_tachyon_environment_but_not_the_sha(monkeypatch):
    for k in [k for k in os.environ if k.startswith("TACHYON_")]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("TACHYON_DECODE_ORDER", "batch")
    monkeypatch.setenv("TACHYON_GIT_SHA", "abc1234")
    monkeypatch.setenv("OTHER_KNOB", "1")
    e = env.capture_env()
    assert e.knobs == {"TACHYON_DECODE_ORDER": "batch"} and e.git_sha == "abc1234"


def test_source_digest_follows_the_files_not_the_sha(tmp_path, monkeypatch):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "a.py").write_text("x = 1\n")
    (pkg / "sub" / "t.json").write_text("{}")
    (pkg / "notes.txt").write_text("not source")
    first = env.source_digest(pkg)
    assert first is not None and len(first) == 16 and first == env.source_digest(pkg)
    (pkg / "notes.txt").write_text("changed")  # neither .py nor .json: same code
    assert env.source_digest(pkg) == first
    (pkg / "sub" / "t.json").write_text('{"k": 1}')
    assert env.source_digest(pkg) != first
    (pkg / "sub" / "t.json").write_text("{}")
    (pkg / "sub" / "t.json").rename(pkg / "t.json")  # same bytes, another path
    assert env.source_digest(pkg) != first
    assert env.source_digest(tmp_path / "missing") is None
    monkeypatch.setenv("TACHYON_GIT_SHA", "stale00")
    e = env.capture_env()
    assert e.git_sha == "stale00" and e.source_digest == env.source_digest()
