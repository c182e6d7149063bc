"""GGUF metadata -> Hugging Face config.json / generation_config.json fields (incl. rope scaling).

Used by tachyon.models.gguf; every function takes an open `gguf.GGUFReader` and raises ValueError
naming the file when a required field is missing or unsupported.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

# GGUF architecture -> (HF architectures entry, HF model_type)
SUPPORTED_ARCHITECTURES: dict[str, tuple[str, str]] = {
    "llama": ("LlamaForCausalLM", "llama"),
    "qwen2": ("Qwen2ForCausalLM", "qwen2"),
    "qwen3": ("Qwen3ForCausalLM", "qwen3"),
}
_DEFAULT_ROPE_THETA = 10000.0
_DEFAULT_RMS_EPS = 1e-6


def _meta(reader, key: str, default: Any = None) -> Any:
    field = reader.fields.get(key)
    return default if field is None else field.contents()


def special_token_ids(reader) -> dict[str, int]:
    """The tokenizer's special tokens as the GGUF file names them: attribute (`eos_token`, ...) -> token id."""
    out = {}
    for attr, key in (("bos_token", "bos_token_id"), ("eos_token", "eos_token_id"), ("pad_token", "padding_token_id"),
                      ("unk_token", "unknown_token_id")):
        value = _meta(reader, f"tokenizer.ggml.{key}")
        if value is not None:
            out[attr] = int(value)
    return out


def _f32(value: Any) -> float:
    """A float32 metadata value as its shortest decimal (1e-05, not 9.999999747378752e-06)."""
    return float(str(np.float32(value)))


def architecture(reader, src: Path) -> str:
    arch = _meta(reader, "general.architecture")
    if arch not in SUPPORTED_ARCHITECTURES:
        raise ValueError(
            f"unsupported GGUF architecture {arch!r} in {src}; supported: {sorted(SUPPORTED_ARCHITECTURES)}"
        )
    return arch


def _required(reader, key: str, src: Path) -> Any:
    value = _meta(reader, key)
    if value is None:
        raise ValueError(f"GGUF file {src} lacks the metadata field {key}")
    return value


# ----------------------------------------------------------------------------------------- config


def build_config(reader, arch: str, src: Path) -> dict[str, Any]:
    """HF config.json contents from the GGUF metadata (and tensor shapes where they are the truth)."""
    tensors = {t.name: t for t in reader.tensors}
    if "token_embd.weight" not in tensors:
        raise ValueError(f"GGUF file {src} lacks the tensor token_embd.weight")
    hidden = int(_required(reader, f"{arch}.embedding_length", src))
    n_heads = int(_required(reader, f"{arch}.attention.head_count", src))
    n_kv = int(_meta(reader, f"{arch}.attention.head_count_kv", n_heads))
    q_rows = int(tensors["blk.0.attn_q.weight"].shape[-1]) if "blk.0.attn_q.weight" in tensors else None
    head_dim = _meta(reader, f"{arch}.attention.key_length") or _meta(reader, f"{arch}.rope.dimension_count")
    head_dim = int(head_dim) if head_dim else (q_rows // n_heads if q_rows else hidden // n_heads)
    if q_rows is not None and q_rows != n_heads * head_dim:
        raise ValueError(
            f"GGUF file {src}: attn_q has {q_rows} rows, expected head_count {n_heads} x head_dim {head_dim}"
        )
    hf_arch, model_type = SUPPORTED_ARCHITECTURES[arch]
    rope_theta = _f32(_meta(reader, f"{arch}.rope.freq_base", _DEFAULT_ROPE_THETA))
    config: dict[str, Any] = {
        "architectures": [hf_arch],
        "model_type": model_type,
        "vocab_size": int(tensors["token_embd.weight"].shape[-1]),
        "hidden_size": hidden,
        "intermediate_size": int(_required(reader, f"{arch}.feed_forward_length", src)),
        "num_hidden_layers": int(_required(reader, f"{arch}.block_count", src)),
        "num_attention_heads": n_heads,
        "num_key_value_heads": n_kv,
        "head_dim": head_dim,
        "hidden_act": "silu",
        "rms_norm_eps": _f32(_meta(reader, f"{arch}.attention.layer_norm_rms_epsilon", _DEFAULT_RMS_EPS)),
        "rope_theta": rope_theta,
        "max_position_embeddings": int(_required(reader, f"{arch}.context_length", src)),
        "tie_word_embeddings": "output.weight" not in tensors,
        "torch_dtype": "float32",
    }
    config["attention_bias"] = "blk.0.attn_q.bias" in tensors
    if arch == "llama":
        config["mlp_bias"] = False
    for name, key in (("bos_token_id", "bos_token_id"), ("eos_token_id", "eos_token_id"),
                      ("pad_token_id", "padding_token_id")):
        value = _meta(reader, f"tokenizer.ggml.{key}")
        if value is not None:
            config[name] = int(value)
    rope_scaling = _rope_scaling(reader, arch, tensors, rope_theta, head_dim, src)
    if rope_scaling is not None:
        config["rope_scaling"] = rope_scaling
    return config


def _rope_scaling(reader, arch: str, tensors: dict, theta: float, head_dim: int, src: Path) -> dict | None:
    """HF rope_scaling from `{arch}.rope.scaling.*` metadata or llama.cpp's `rope_freqs` tensor."""
    from gguf import dequantize

    kind = _meta(reader, f"{arch}.rope.scaling.type")
    factor = _meta(reader, f"{arch}.rope.scaling.factor")
    original = _meta(reader, f"{arch}.rope.scaling.original_context_length")
    if "rope_freqs.weight" in tensors:
        t = tensors["rope_freqs.weight"]
        factors = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float64).reshape(-1)
        return _llama3_scaling(factors, theta, head_dim, int(original) if original else None, src)
    if kind in (None, "none") or factor is None:
        return None
    if kind not in ("linear", "yarn"):
        raise ValueError(f"GGUF file {src}: unsupported {arch}.rope.scaling.type {kind!r}")
    scaling: dict[str, Any] = {"rope_type": kind, "factor": _f32(factor)}
    if original:
        scaling["original_max_position_embeddings"] = int(original)
    if kind == "yarn":
        for gguf_key, hf_key in (("yarn_beta_fast", "beta_fast"), ("yarn_beta_slow", "beta_slow")):
            value = _meta(reader, f"{arch}.rope.scaling.{gguf_key}")
            if value is not None:
                scaling[hf_key] = _f32(value)
    return scaling


def _llama3_factors(head_dim: int, theta: float, scaling: dict) -> np.ndarray:
    """Per-frequency divisors of Llama 3 rope scaling (what llama.cpp stores as rope_freqs)."""
    freqs = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    wavelen = 2 * np.pi / freqs
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    original = scaling["original_max_position_embeddings"]
    smooth = np.clip((original / wavelen - low) / (high - low), 0.0, 1.0)
    return 1.0 / ((1 - smooth) / factor + smooth)


def _llama3_scaling(factors: np.ndarray, theta: float, head_dim: int, original: int | None,
                    src: Path) -> dict | None:
    """Recover HF `llama3` rope_scaling parameters from llama.cpp's per-frequency factors.

    Only the ratios low/original and high/original matter, so the parameters are solved with
    low_freq_factor fixed at 1 (and high_freq_factor 4 when there is too little data), then checked
    by recomputing every factor. Raises ValueError when no llama3 parameters reproduce the tensor.
    """
    if factors.shape != (head_dim // 2,):
        raise ValueError(
            f"GGUF file {src}: rope_freqs has shape {factors.shape}, expected ({head_dim // 2},)"
        )
    factor = float(factors.max())
    if factor <= 1.0 + 1e-6:
        return None
    x = (1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)) / (2 * np.pi)
    smooth = (1.0 / factors - 1.0 / factor) / (1.0 - 1.0 / factor)  # 0 at low freqs .. 1 at high freqs
    mid = (smooth > 1e-4) & (smooth < 1 - 1e-4)
    low = 1.0
    if original is not None and mid.sum() >= 1:  # smooth = (original * x - low) / (high - low)
        i = int(np.argmax(mid))
        high = low + (original * x[i] - low) / smooth[i]
    elif mid.sum() >= 2:
        slope, intercept = np.polyfit(x[mid], smooth[mid], 1)
        high = low - 1.0 / intercept
        original = slope * (high - low)
    elif mid.sum() == 1:
        i = int(np.argmax(mid))
        high = 4.0
        original = (smooth[i] * (high - low) + low) / x[i]
    else:
        high, original = 4.0, original or 8192
    scaling = {
        "rope_type": "llama3",
        "factor": _f32(factor),
        "low_freq_factor": low,
        "high_freq_factor": round(float(high), 4),
        "original_max_position_embeddings": int(round(float(original))),
    }
    if not np.allclose(_llama3_factors(head_dim, theta, scaling), factors, rtol=1e-3, atol=1e-4):
        raise ValueError(f"GGUF file {src}: cannot express rope_freqs.weight as llama3 rope scaling")
    return scaling


def generation_config(reader, config: dict[str, Any]) -> dict[str, Any]:
    """generation_config.json: bos/pad as in config; eos lists every end-of-generation token."""
    out = {k: config[k] for k in ("bos_token_id", "pad_token_id") if k in config}
    eos = [config["eos_token_id"]] if "eos_token_id" in config else []
    for key in ("tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"):
        value = _meta(reader, key)
        if value is not None and int(value) not in eos:
            eos.append(int(value))
    if eos:
        out["eos_token_id"] = eos[0] if len(eos) == 1 else eos
    return out
