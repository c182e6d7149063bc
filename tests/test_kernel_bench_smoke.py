"""benchmarks/kernels/run_all.py --smoke (and attn_kv_fp8.py --smoke) on CPU: the scripts run as the GPU scripts
call them (cwd benchmarks/kernels), exit 0, and record every kernel family with its error within tolerance.
The full smoke run takes ~30 s on two cores (Triton interpreter)."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KDIR = ROOT / "benchmarks" / "kernels"

# (kernel, shape) -> the largest error allowed (rel_err; tv_distance for sample_distribution)
EXPECTED = {
    ("store_kv", "T=5"): 0.0,
    **{("attention", s): 1e-2 for s in ["decode B=1 ctx=40", "decode B=1 ctx=130", "decode B=3 ctx=40",
                                         "decode B=3 ctx=130", "prefill smoke"]},
    ("rmsnorm+residual", "T=3 H=64"): 1e-2,
    ("rotary", "T=3"): 1e-2,
    ("silu_and_mul", "T=3 I=96"): 1e-2,
    **{("sample", f"B=2 V=300 {m}"): 0.0 for m in ["greedy", "temperature", "top_p0.9", "top_k50",
                                                   "k50_p0.9_minp0.05"]},
    ("penalties", "B=2 V=300"): 1e-4,
    ("layer_bs1", "Qwen3-0.6B ctx=40 5 launches"): 1e-2,
    ("sample_distribution", "V=32 n=50 x4 configs"): 0.5,
}


def _run(script: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
    if workers:  # share the cores with the other workers, as tests/conftest.py does for in-process torch
        env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // workers))
    return subprocess.run([sys.executable, script, "--smoke", *args], cwd=KDIR, env=env, capture_output=True,
                          text=True, timeout=300)


def _ok(p: subprocess.CompletedProcess) -> None:
    assert p.returncode == 0, f"rc {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"


def _check_rows(rows: list[dict], expected: dict) -> None:
    errors = [r for r in rows if "error" in r]
    assert not errors, f"kernels raised: {errors}"
    got = {(r["kernel"], r["shape"]): r for r in rows}
    missing = set(expected) - set(got)
    assert not missing, f"not recorded: {sorted(missing)}"
    for key, tol in expected.items():
        r = got[key]
        err = r["tv_distance"] if "tv_distance" in r else r["rel_err"]
        assert err <= tol and r["ok"], f"{key}: error {err} over {tol}: {r}"
    assert all(r["ok"] for r in rows), [r for r in rows if not r["ok"]]


def test_run_all_smoke(tmp_path):
    p = _run("run_all.py", "--out", str(tmp_path))
    _ok(p)
    assert {f.name for f in tmp_path.iterdir()} == {"kernels.json", "kernels.md", "kernels_partial.json"}
    res = json.loads((tmp_path / "kernels.json").read_text())
    assert set(res) == {"env", "smoke", "bandwidth_Bps", "flops_per_s", "wall_s", "rows", "sweep"}
    assert res["smoke"] is True
    _check_rows(res["rows"], EXPECTED)
    assert len(res["rows"]) == len(EXPECTED)
    for r in res["rows"]:
        if "time_us" in r:
            assert r["time_us"] > 0 and r["graph_us"] is None and r["floor_us"] > 0, r
    attn = [s for s in res["sweep"] if s["kind"] in ("prefill", "decode")]
    samp = [s for s in res["sweep"] if s["kind"].startswith("sample ")]
    assert len(attn) == 3 and all("error" not in s and s["rel_err"] <= 1e-2 for s in attn), attn
    assert len(samp) == 12 and all(s["ok"] for s in samp), samp
    partial = json.loads((tmp_path / "kernels_partial.json").read_text())
    assert partial and partial == res["rows"][: len(partial)]  # the timed rows as they came
    assert f"{len(EXPECTED)}/{len(EXPECTED)} ok" in p.stdout


def test_run_all_only_penalties(tmp_path):
    _ok(p := _run("run_all.py", "--only", "penalties", "--out", str(tmp_path)))
    res = json.loads((tmp_path / "kernels.json").read_text())
    _check_rows(res["rows"], {("penalties", "B=2 V=300"): 1e-4})
    assert len(res["rows"]) == 1 and res["sweep"] == [] and "1/1 ok" in p.stdout
    bad = _run("run_all.py", "--only", "nope", "--out", str(tmp_path / "bad"))
    assert bad.returncode != 0 and "unknown kernel families ['nope']" in bad.stderr


def test_attn_kv_fp8_smoke(tmp_path):
    """Both caches' rows, then (--widen-sweep) the e4m3 decode row once per widening mode."""
    _ok(_run("attn_kv_fp8.py", "--out", str(tmp_path), "--widen-sweep"))
    res = json.loads((tmp_path / "kernels_kv_fp8.json").read_text())
    names = ["decode B=3 ctx=40", "prefill 1x2048", "prefill 4x512 after 512 cached"]
    want = {(k, s): 1e-2 for s in names for k in ("attention", "attention, e4m3 cache")}
    want.update({("attention, e4m3 cache", f"decode B=3 ctx=40 widen={m} tile=16:4:1"): 1e-2
                 for m in ("cvt", "asm", "cvt:asm", "asm:cvt")})
    _check_rows(res["rows"], want)
    assert len(res["rows"]) == 10 and res["smoke"] is True
