"""Warm-up kernel choices: the tuning cache, the shipped table and its step-measured overrides, and
tune_gemv's bookkeeping (driven on CPU through a tensor that reports is_cuda)."""

import importlib
from pathlib import Path

import torch

from tachyon import kernels
from tachyon.kernels.gemv import CONFIGS
from tachyon.models.layers import Linear, tune_gemv


def test_tuning_cache_roundtrip_shipped_table_and_retune(tmp_path, monkeypatch):
    import json

    from tachyon.kernels import tuning

    monkeypatch.setenv("TACHYON_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tuning, "_USER", None)
    monkeypatch.setattr(tuning, "_SHIPPED", {})
    w = torch.empty(24, 300)
    key = tuning.make_key(w, False, "m1")
    assert tuning.lookup("Some_GPU", key) == (False, None)
    tuning.remember("Some_GPU", key, (4, 1024, 4, 1))
    tuning.remember("Some_GPU", key + "x", None)
    monkeypatch.setattr(tuning, "_USER", None)  # a new process reads the file back
    assert tuning.lookup("Some_GPU", key) == (True, (4, 1024, 4, 1))
    assert tuning.lookup("Some_GPU", key + "x") == (True, None)  # "cuBLAS" is a decision too
    assert json.loads((tmp_path / "kernel_tuning.json").read_text())["Some_GPU"][key] == [4, 1024, 4, 1]
    monkeypatch.setenv("TACHYON_RETUNE", "1")
    assert tuning.lookup("Some_GPU", key) == (False, None)
    monkeypatch.delenv("TACHYON_RETUNE")
    # the shipped H200 table is read for that GPU model, and only for it
    shipped = json.loads((Path(tuning.__file__).parent / "tuned" / "NVIDIA_H200.json").read_text())["entries"]
    some_key, some_val = next(iter(shipped.items()))
    assert tuning.lookup("NVIDIA_H200", some_key) == (True, tuple(some_val) if some_val else None)
    assert tuning.lookup("Other_GPU", some_key) == (False, None)


def test_shipped_table_matches_current_candidates(monkeypatch):
    """The shipped decisions were measured against today's candidate lists of their kind; changing a kind's
    list changes that kind's fingerprint only (so its stale entries, and only those, are ignored) —
    re-measure and regenerate those entries then."""
    import json

    from tachyon.kernels import tuning

    table = json.loads((Path(tuning.__file__).parent / "tuned" / "NVIDIA_H200.json").read_text())
    assert table["fingerprint"] == {k: tuning.fingerprint(k) for k in table["fingerprint"]}
    for key in table["entries"]:
        assert key.startswith(tuning.fingerprint(key.rsplit("|", 1)[1]) + "|"), key
    before = {k: tuning.fingerprint(k) for k in ("m1", "m1+silu", "m8")}
    mod = importlib.import_module("tachyon.kernels.gemv")
    monkeypatch.setattr(mod, "CONFIGS", mod.CONFIGS[:-1])
    assert tuning.fingerprint("m1") != before["m1"] and tuning.fingerprint("m1+silu") != before["m1+silu"]
    assert tuning.fingerprint("m8") == before["m8"]
    small = importlib.import_module("tachyon.kernels.gemm_small")
    monkeypatch.setattr(small, "SMALL_CONFIGS", small.SMALL_CONFIGS[:-1])
    assert tuning.fingerprint("m8") != before["m8"]


def test_fp8_kinds_fingerprint_their_own_candidates(monkeypatch):
    """FP8 skinny-GEMM decisions hash quant_fp8's candidate lists (the fast-accumulation ones only in the
    "fast" kind), not the bf16 list; the FP8 batch-1 GEMV hashes its own list (the bf16 one and wider K tiles)."""
    from tachyon.kernels import quant_fp8, tuning

    kinds = ("m8", "m8fp8", "m8fp8fast", "m1", "m1fp8")
    before = {k: tuning.fingerprint(k) for k in kinds}
    assert len(set(before.values())) == 5
    monkeypatch.setattr(quant_fp8, "FP8_SMALL_FAST_CONFIGS", quant_fp8.FP8_SMALL_FAST_CONFIGS[:-1])
    assert [tuning.fingerprint(k) == before[k] for k in kinds] == [True, True, False, True, True]
    monkeypatch.setattr(quant_fp8, "FP8_SMALL_CONFIGS", quant_fp8.FP8_SMALL_CONFIGS[:-1])
    assert [tuning.fingerprint(k) == before[k] for k in kinds] == [True, False, False, True, True]
    monkeypatch.setattr(quant_fp8, "FP8_GEMV_CONFIGS", quant_fp8.FP8_GEMV_CONFIGS[:-1])
    assert [tuning.fingerprint(k) == before[k] for k in kinds] == [True, False, False, True, False]


class _FakeCuda(torch.Tensor):
    """A CPU tensor that reports is_cuda, to drive tune_gemv's bookkeeping without a GPU."""

    @property
    def is_cuda(self):
        return True


def test_tune_gemv_decides_once_per_shape_and_remembers(tmp_path, monkeypatch):
    from tachyon.kernels import tuning

    monkeypatch.setenv("TACHYON_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tuning, "_USER", None)
    monkeypatch.setattr(tuning, "device_tag", lambda dev: "Fake_GPU")
    calls = []
    monkeypatch.setattr(kernels, "pick_gemv_config", lambda w, b: calls.append("m1") or CONFIGS[1])
    monkeypatch.setattr(kernels, "pick_small_config", lambda w, b, m: calls.append("m8") or None)
    monkeypatch.setattr(kernels, "pick_fused_config",
                        lambda w, b, p, plain, norm_w=None: calls.append(p) or CONFIGS[2])
    model = torch.nn.Sequential(Linear(64, 32), Linear(64, 32), Linear(64, 32, bias=True))
    model[1].prologue = "rmsnorm"
    for lin in model:
        lin.weight = torch.nn.Parameter(lin.weight.data.as_subclass(_FakeCuda), requires_grad=False)
    first = tune_gemv(model)
    assert calls == ["m1", "m8", "rmsnorm", "m1", "m8"]  # same shape timed once; bias is another shape
    assert [(m.gemv_config, m.small_config, m.fused_config) for m in model] == [
        (CONFIGS[1], None, None), (CONFIGS[1], None, CONFIGS[2]), (CONFIGS[1], None, None)]
    calls.clear()
    monkeypatch.setattr(tuning, "_USER", None)  # the next start reads the user cache back
    assert tune_gemv(model) == first and calls == []


def test_tune_gemv_gives_fp8_layers_their_own_decisions(tmp_path, monkeypatch):
    """An FP8 layer is timed with the FP8 pickers under its own kinds (the fast-accumulation setting part of the
    skinny GEMM's), never given a fused prologue / epilogue config, and a bf16 layer of the same shape keeps its
    own decisions."""
    from tachyon.kernels import quant_fp8, tuning

    monkeypatch.setenv("TACHYON_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tuning, "_USER", None)
    monkeypatch.setattr(tuning, "device_tag", lambda dev: "Fake_GPU")
    calls = []
    monkeypatch.setattr(kernels, "pick_gemv_config", lambda w, b: calls.append(("m1", w.dtype)) or CONFIGS[1])
    monkeypatch.setattr(kernels, "pick_small_config", lambda w, b, m: calls.append(("m8", w.dtype)) or None)
    monkeypatch.setattr(kernels, "pick_fused_config",
                        lambda w, b, p, plain, norm_w=None: calls.append((p, w.dtype)) or CONFIGS[2])
    monkeypatch.setattr(kernels, "pick_fp8_gemv_config",
                        lambda w, s, b: calls.append(("m1fp8", w.dtype, s.shape)) or CONFIGS[3])
    small = (0, 32, 256, 4, 4, 1)
    monkeypatch.setattr(kernels, "pick_fp8_small_config",
                        lambda w, s, b, m: calls.append(("m8fp8", quant_fp8.fast_accum())) or small)
    model = torch.nn.Sequential(Linear(64, 32), Linear(64, 32))
    for lin in model:
        lin.prologue = "rmsnorm"
    model[0].quantize_fp8()
    for lin in model:
        lin.weight = torch.nn.Parameter(lin.weight.data.as_subclass(_FakeCuda), requires_grad=False)
    tune_gemv(model)
    fp8 = torch.float8_e4m3fn
    assert calls == [("m1fp8", fp8, (32,)), ("m8fp8", True), ("m1", torch.float32), ("m8", torch.float32),
                     ("rmsnorm", torch.float32)]
    assert (model[0].gemv_config, model[0].small_config, model[0].fused_config) == (CONFIGS[3], small, None)
    assert (model[1].gemv_config, model[1].small_config, model[1].fused_config) == (CONFIGS[1], None, CONFIGS[2])
    calls.clear()
    monkeypatch.setenv("TACHYON_FP8_FAST_ACCUM", "0")  # another candidate list: decided afresh, once
    tune_gemv(model)
    tune_gemv(model)
    assert calls == [("m8fp8", False)]


def test_step_overrides_win_and_are_valid(tmp_path, monkeypatch):
    """A shipped step-measured choice wins over the user cache and the per-weight entries for its key (and
    only for its key); TACHYON_RETUNE=1 ignores it too. Every shipped override is keyed with today's
    fingerprint, is a GEMV config (power-of-two BLOCK_N / BLOCK_K) and names committed evidence."""
    import json

    from tachyon.kernels import tuning

    path = Path(tuning.__file__).parent / "tuned" / "NVIDIA_H200.json"
    table = json.loads(path.read_text())
    assert table["step_overrides"]
    root = Path(__file__).resolve().parents[1]
    for key, v in table["step_overrides"].items():
        assert key.startswith(tuning.fingerprint(key.rsplit("|", 1)[1]) + "|"), key
        if v["choice"] is not None:  # None: keep cuBLAS / the unfused pair
            block_n, block_k, warps, stages = v["choice"]
            assert all(x > 0 and x & (x - 1) == 0 for x in (block_n, block_k, warps)) and stages >= 1
        evidence = v["evidence"].split(":")[0]
        assert (root / evidence).is_file(), evidence
    monkeypatch.setenv("TACHYON_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tuning, "_USER", None)
    for key, v in table["step_overrides"].items():
        tuning.remember("NVIDIA_H200", key, (4, 1024, 4, 1))  # a per-weight measurement of the same key
        want = tuple(v["choice"]) if v["choice"] is not None else None
        assert tuning.lookup("NVIDIA_H200", key) == (True, want)
        if key in table["entries"]:
            assert table["entries"][key] != v["choice"]  # an override that changes nothing is noise
        assert tuning.lookup("Other_GPU", key) == (False, None)
    monkeypatch.setenv("TACHYON_RETUNE", "1")
    assert tuning.lookup("NVIDIA_H200", key) == (False, None)


def test_tune_gemv_decides_the_glu_epilogue(tmp_path, monkeypatch):
    from tachyon.kernels import tuning

    monkeypatch.setenv("TACHYON_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tuning, "_USER", None)
    monkeypatch.setattr(tuning, "device_tag", lambda dev: "Fake_GPU")
    seen = []
    monkeypatch.setattr(kernels, "pick_gemv_config", lambda w, b: CONFIGS[1])
    monkeypatch.setattr(kernels, "pick_small_config", lambda w, b, m: None)
    monkeypatch.setattr(kernels, "pick_glu_config", lambda w, b, plain: seen.append(plain) or CONFIGS[3])
    model = torch.nn.Sequential(Linear(64, 32), Linear(64, 32), Linear(64, 16))
    model[0].epilogue = model[1].epilogue = "silu"
    for lin in model:
        lin.weight = torch.nn.Parameter(lin.weight.data.as_subclass(_FakeCuda), requires_grad=False)
    chosen = tune_gemv(model)
    assert seen == [CONFIGS[1]]  # timed once per shape, against the chosen plain GEMV
    assert [m.epilogue_config for m in model] == [CONFIGS[3], CONFIGS[3], None]
    assert chosen["32x64@m1+glu"] == CONFIGS[3]


def test_pick_skips_a_config_that_fails_and_keeps_the_rest(monkeypatch):
    """One candidate that cannot build (here: raises) costs only itself: the fastest correct other one still wins
    if it beats the baseline by 3%, and a fast but wrong one never does."""
    from tachyon.kernels import gemv_select

    times = {"a": 0.9, "b": 0.5, "c": 0.95}  # ms; the baseline takes 1.0

    def fake_timer(fn, weights):
        # _pick times `lambda wi, cfg=cfg: candidate(wi, cfg)`: its default argument names the config
        return times.get((fn.__defaults__ or (None,))[0], 1.0)

    monkeypatch.setattr(gemv_select, "_graph_time_ms", fake_timer)
    w, x = torch.randn(8, 16), torch.randn(1, 16)
    ref = x @ w.t()

    def candidate(wi, cfg):
        if cfg == "broken":
            raise RuntimeError("out of resources: shared memory")
        return ref * 1.5 if cfg == "b" else ref  # "b": the fastest, but wrong

    assert gemv_select._pick(w, lambda wi: ref, candidate, 0, ("broken", "b", "a", "c")) == "a"
    assert gemv_select._pick(w, lambda wi: ref, candidate, 0, ("broken",)) is None  # skipped, not raised


def test_fp8_pickers_run_their_own_kernel_over_their_own_candidates(monkeypatch):
    """pick_fp8_gemv_config / pick_fp8_small_config (driven on CPU: a weight that reports is_cuda, a timer that
    makes one candidate fastest) check each candidate's real W8A8 output against cuBLASLt's path and return the
    fastest correct one from their own list; the baseline itself runs (a broken one would return None)."""
    from tachyon.kernels import gemv_select
    from tachyon.kernels import quant_fp8 as q8
    from tests.kernel_env import CUDA, interpreter_usable

    if CUDA or not interpreter_usable() or not hasattr(torch, "_scaled_mm"):
        import pytest

        # on a GPU the kernels compile for the device and cannot take this test's CPU tensors
        pytest.skip("needs the Triton interpreter (CPU) and torch._scaled_mm")
    monkeypatch.setattr(gemv_select, "HAS_TRITON", True)
    monkeypatch.setenv("TACHYON_FP8_FAST_ACCUM", "1")
    w_q, w_s = q8.quantize_weight(torch.randn(32, 64))
    w_q = w_q.as_subclass(_FakeCuda)
    for pick, configs, want in ((kernels.pick_fp8_gemv_config, q8.FP8_GEMV_CONFIGS, q8.FP8_GEMV_CONFIGS[-1]),
                                (kernels.pick_fp8_small_config, q8.FP8_SMALL_CONFIGS + q8.FP8_SMALL_FAST_CONFIGS,
                                 q8.FP8_SMALL_FAST_CONFIGS[0])):
        seen = []

        def fake_timer(fn, weights, want=want, seen=seen):
            cfg = (fn.__defaults__ or (None,))[0]
            seen.append(cfg)
            return 0.5 if cfg == want else 1.0

        monkeypatch.setattr(gemv_select, "_graph_time_ms", fake_timer)
        assert pick(w_q, w_s, None) == want
        assert seen[0] is None and set(seen[1:]) == set(configs)  # the baseline, then every candidate: all correct
