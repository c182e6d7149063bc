"""Dummy weights: the default init (normal(0, 0.02) matrices, norm weights 1) and TACHYON_DUMMY_INIT=uniform
(vLLM's dummy loader: every parameter uniform(-1e-3, 1e-3)), checked on a tiny checkpoint loaded as dummy."""

import pytest
import torch

from tachyon.models.loader import load_model, resolve_model


def _dummy(tiny_dir: str):
    resolved = resolve_model(tiny_dir, "dummy")
    model, _ = load_model(resolved, device=torch.device("cpu"), dtype=torch.float32, seed=0)
    return dict(model.named_parameters())


def test_default_dummy_init_is_normal_with_unit_norms(tiny_llama, monkeypatch):
    monkeypatch.delenv("TACHYON_DUMMY_INIT", raising=False)
    params = _dummy(tiny_llama)
    norms = [p for n, p in params.items() if n.endswith("norm.weight")]
    mats = torch.cat([p.flatten() for n, p in params.items() if p.dim() == 2])
    assert norms and all(bool((p == 1).all()) for p in norms)
    assert 0.018 < float(mats.std()) < 0.022 and abs(float(mats.mean())) < 1e-3
    assert float(mats.abs().max()) > 0.05  # a normal's tails, not a +-1e-3 box


def test_uniform_dummy_init_matches_vllm_everywhere(tiny_llama, monkeypatch):
    monkeypatch.setenv("TACHYON_DUMMY_INIT", "uniform")
    params = _dummy(tiny_llama)
    everything = torch.cat([p.detach().flatten() for p in params.values()])
    assert float(everything.abs().max()) <= 1e-3
    # uniform on [-1e-3, 1e-3]: std 1e-3 / sqrt(3), norms included (none left at 1)
    assert abs(float(everything.std()) - 1e-3 / 3 ** 0.5) < 5e-5
    assert all(float(p.abs().max()) <= 1e-3 for n, p in params.items() if n.endswith("norm.weight"))


def test_unknown_dummy_init_names_the_variable(tiny_llama, monkeypatch):
    monkeypatch.setenv("TACHYON_DUMMY_INIT", "zeros")
    with pytest.raises(ValueError, match="TACHYON_DUMMY_INIT"):
        _dummy(tiny_llama)
