"""Model shapes: built-in dummy shapes (BENCHMARKS.md) and any HF config, with parameter and byte counts.

Contract: `resolve_shape(name_or_dir)` accepts a built-in name (`qwen2.5-7b`, `qwen3-0.6b`), an HF model
directory or a config.json path, and returns a `Shape`. `shape_dir(name)` writes a config-only HF
directory for a built-in shape (for dummy-weight loading) and returns its path.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from tachyon._files import write_text_atomic
from tachyon.models.shapes import BUILTIN_SHAPES

DTYPE_BYTES = {
    "float32": 4, "fp32": 4, "float": 4, "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2, "half": 2,
    "auto": 2, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "int8": 1, "int4": 0.5,
}

# one source of truth for the built-in shapes: the model layer's table
BUILTIN_CONFIGS: dict[str, dict] = {
    name: {**cfg, "hidden_act": "silu", "torch_dtype": "bfloat16"} for name, cfg in BUILTIN_SHAPES.items()
}
ALIASES = {"qwen2.5-7b-instruct": "qwen2.5-7b", "qwen/qwen2.5-7b": "qwen2.5-7b",
           "qwen/qwen2.5-7b-instruct": "qwen2.5-7b", "qwen3-0.6b-base": "qwen3-0.6b",
           "qwen/qwen3-0.6b": "qwen3-0.6b"}


def builtin_name(name: str | None) -> str | None:
    """The built-in shape key for `name`, or None."""
    if not name:
        return None
    key = name.lower()
    key = ALIASES.get(key, key)
    return key if key in BUILTIN_CONFIGS else None


@dataclass(frozen=True)
class Shape:
    name: str
    model_type: str
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool
    qkv_bias: bool
    qk_norm: bool
    max_position: int

    @classmethod
    def from_config(cls, cfg: dict, name: str = "") -> Shape:
        heads = int(cfg["num_attention_heads"])
        hidden = int(cfg["hidden_size"])
        mt = str(cfg.get("model_type", ""))
        return cls(
            name=name or mt, model_type=mt, hidden=hidden, intermediate=int(cfg["intermediate_size"]),
            layers=int(cfg["num_hidden_layers"]), heads=heads,
            kv_heads=int(cfg.get("num_key_value_heads") or heads),
            head_dim=int(cfg.get("head_dim") or hidden // heads), vocab=int(cfg["vocab_size"]),
            tied=bool(cfg.get("tie_word_embeddings", False)),
            qkv_bias=mt == "qwen2" or bool(cfg.get("attention_bias", False)),
            qk_norm=mt == "qwen3", max_position=int(cfg.get("max_position_embeddings", 4096)),
        )

    def layer_params(self) -> int:
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        attn = self.hidden * (q + 2 * kv) + q * self.hidden
        if self.qkv_bias:
            attn += q + 2 * kv
        if self.qk_norm:
            attn += 2 * self.head_dim
        return attn + 3 * self.hidden * self.intermediate + 2 * self.hidden

    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    def num_params(self) -> int:
        """All parameters; tied embeddings counted once."""
        lm_head = 0 if self.tied else self.embedding_params()
        return self.layers * self.layer_params() + self.hidden + self.embedding_params() + lm_head

    def decode_read_params(self) -> int:
        """Parameters read by one decode step: everything but the input-embedding table
        (a tied table is read once, as the LM head)."""
        return self.layers * self.layer_params() + self.hidden + self.embedding_params()

    def kv_bytes_per_token(self, kv_dtype_bytes: float, tp: int = 1) -> float:
        kv_heads_per_rank = max(1.0, self.kv_heads / tp)
        return 2 * self.layers * kv_heads_per_rank * self.head_dim * kv_dtype_bytes


def _read_config(path: str) -> dict:
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    return json.loads(p.read_text())


def resolve_shape(name_or_dir: str) -> Shape:
    """Shape of a built-in name, an HF directory or a config.json file."""
    key = builtin_name(name_or_dir)
    if key:
        return Shape.from_config(BUILTIN_CONFIGS[key], key)
    if os.path.exists(name_or_dir):
        return Shape.from_config(_read_config(name_or_dir), Path(name_or_dir).name)
    raise ValueError(f"unknown model shape {name_or_dir!r}: use {sorted(BUILTIN_CONFIGS)} or an HF directory")


def hf_config_dict(name_or_dir: str) -> dict:
    key = builtin_name(name_or_dir)
    return dict(BUILTIN_CONFIGS[key]) if key else _read_config(name_or_dir)


def shape_dir(name: str, root: str | None = None) -> str:
    """A config-only HF directory for built-in shape `name` (created once), for dummy-weight engines."""
    key = builtin_name(name)
    if key is None:
        raise ValueError(f"not a built-in shape: {name!r}")
    base = Path(root or os.environ.get("TACHYON_CACHE", Path.home() / ".cache" / "tachyon")) / "shapes" / key
    base.mkdir(parents=True, exist_ok=True)
    cfg = base / "config.json"
    text = json.dumps(BUILTIN_CONFIGS[key], indent=2, sort_keys=True)
    if not cfg.exists() or cfg.read_text() != text:
        write_text_atomic(cfg, text)  # a concurrent process never reads half of it
    return str(base)
