"""Model resolution and weight loading: HF directories (single or sharded safetensors), GGUF files
(converted once to an HF directory by tachyon.models.gguf), and dummy weights (random, real shapes).

`load_model` returns a ready `DecoderForCausalLM` on the requested device/dtype, its ModelSpec, and
the tokenizer (None when the checkpoint ships none, e.g. a bare dummy shape).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from tachyon.models.llama import DecoderForCausalLM
from tachyon.models.shapes import BUILTIN_SHAPES
from tachyon.models.spec import ModelSpec


@dataclass
class ResolvedModel:
    path: str | None  # HF-style directory, or None for a built-in dummy shape
    hf_config: dict
    generation_config: dict
    load_format: str  # safetensors | dummy
    name: str


def resolve_model(model: str | None, load_format: str = "auto") -> ResolvedModel:
    """Turn a user's model argument into a directory + config. Raises ValueError for unknown paths."""
    if model is None:
        from tachyon.models.default import DEFAULT_MODEL_NAME, default_model_path

        model, name = default_model_path(), DEFAULT_MODEL_NAME
    else:
        name = model
    key = model.lower()
    if key in BUILTIN_SHAPES or key.removeprefix("dummy:") in BUILTIN_SHAPES:
        cfg = dict(BUILTIN_SHAPES[key.removeprefix("dummy:")])
        return ResolvedModel(None, cfg, {}, "dummy", key.removeprefix("dummy:"))
    p = Path(model).expanduser()
    if not p.exists():
        raise ValueError(f"model path {model!r} does not exist (expected an HF model directory, a .gguf "
                         f"file, or one of the built-in dummy shapes: {', '.join(sorted(BUILTIN_SHAPES))})")
    if p.is_file():
        if p.suffix != ".gguf" and load_format != "gguf":
            raise ValueError(f"model file {model!r} is not a .gguf file")
        from tachyon.models.gguf import gguf_to_hf_dir

        p = Path(gguf_to_hf_dir(str(p)))
        if name == str(model):
            name = Path(model).stem
    cfg_file = p / "config.json"
    if not cfg_file.exists():
        raise ValueError(f"model directory {model!r} has no config.json")
    try:
        cfg = json.loads(cfg_file.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"model config {cfg_file} is not valid JSON: {e}") from None
    gen_file = p / "generation_config.json"
    gen = json.loads(gen_file.read_text()) if gen_file.exists() else {}
    fmt = "dummy" if load_format == "dummy" else "safetensors"
    return ResolvedModel(str(p), cfg, gen, fmt, name)


def iter_safetensors(path: str) -> Iterator[tuple[str, torch.Tensor]]:
    """Yield (name, tensor) from model.safetensors or the shards listed in model.safetensors.index.json."""
    from safetensors import SafetensorError, safe_open

    d = Path(path)
    index = d / "model.safetensors.index.json"
    if index.exists():
        files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    else:
        files = sorted(f.name for f in d.glob("*.safetensors"))
    if not files:
        raise ValueError(f"model directory {path!r} has no .safetensors weights")
    for f in files:
        fp = d / f
        if not fp.exists():
            raise ValueError(f"weight shard {fp} listed in the index is missing")
        try:
            with safe_open(str(fp), framework="pt") as sf:
                for name in sf.keys():
                    yield name, sf.get_tensor(name)
        except (SafetensorError, OSError) as e:
            raise ValueError(f"weight file {fp} is truncated or corrupt: {e}") from None


def _init_dummy(model: DecoderForCausalLM, seed: int) -> None:
    """Random weights. Default: normal(0, 0.02) matrices and biases, norm weights 1 (the transformers init).
    TACHYON_DUMMY_INIT=uniform: every parameter, norms included, uniform(-1e-3, 1e-3) (vLLM's dummy loader) --
    an A/B knob for how much the data itself moves a power-capped run (7B nano256 +0.8%:
    docs/performance-history.md, stop 22). Any other value raises ValueError."""
    gen = torch.Generator(device=next(model.parameters()).device).manual_seed(seed)
    scheme = os.environ.get("TACHYON_DUMMY_INIT", "normal")
    if scheme not in ("normal", "uniform"):
        raise ValueError(f"TACHYON_DUMMY_INIT must be 'normal' or 'uniform', got {scheme!r}")
    for name, p in model.named_parameters():
        if scheme == "uniform":
            p.data.uniform_(-1e-3, 1e-3, generator=gen)
        elif name.endswith("norm.weight"):
            p.data.fill_(1.0)
        else:
            p.data.normal_(0.0, 0.02, generator=gen)


def load_model(resolved: ResolvedModel, *, device: torch.device, dtype: torch.dtype, seed: int = 0):
    """Build the decoder and fill its weights. Returns (model, spec)."""
    spec = ModelSpec.from_hf_config(resolved.hf_config, resolved.generation_config)
    prev = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = DecoderForCausalLM(spec)
    finally:
        torch.set_default_dtype(prev)
    if resolved.load_format == "dummy":
        _init_dummy(model, seed)
    else:
        loaded = model.load_weights(iter_safetensors(resolved.path))
        missing = model.expected_keys() - loaded
        if missing:
            raise ValueError(f"checkpoint {resolved.path!r} is missing tensors: {', '.join(sorted(missing)[:8])}")
    # rotary caches stay in float32 whatever the weight dtype
    for m in model.modules():
        if hasattr(m, "cos_sin_cache"):
            m.cos_sin_cache = m.cos_sin_cache.float()
    return model.eval(), spec


def load_tokenizer(resolved: ResolvedModel, tokenizer: str | None = None):
    path = tokenizer or resolved.path
    if path is None:
        return None
    if not os.path.exists(os.path.join(path, "tokenizer.json")) and not os.path.exists(
            os.path.join(path, "tokenizer_config.json")):
        return None
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)
