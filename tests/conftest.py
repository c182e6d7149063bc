import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from tests.tiny_models import smollm2_gguf_path, tiny_model_dir  # noqa: E402


@pytest.fixture(scope="session")
def tiny_llama() -> str:
    return tiny_model_dir("llama")


@pytest.fixture(scope="session")
def tiny_qwen2() -> str:
    return tiny_model_dir("qwen2")


@pytest.fixture(scope="session")
def tiny_qwen3() -> str:
    return tiny_model_dir("qwen3")


@pytest.fixture(scope="session")
def smollm2_gguf() -> str:
    return smollm2_gguf_path()


@pytest.fixture
def poison(monkeypatch):
    """torch.empty / empty_like hand out NaN-filled (float) or -7-filled (int) memory, so elements a
    kernel should have written but did not show up."""
    import torch

    real_empty, real_like = torch.empty, torch.empty_like

    def fill(t: "torch.Tensor") -> "torch.Tensor":
        return t.fill_(float("nan") if t.is_floating_point() else -7)

    monkeypatch.setattr(torch, "empty", lambda *a, **k: fill(real_empty(*a, **k)))
    monkeypatch.setattr(torch, "empty_like", lambda *a, **k: fill(real_like(*a, **k)))
