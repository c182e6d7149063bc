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
