"""GGUF -> Hugging Face-style model directory (config, fp32 safetensors, tokenizer), cached on disk.

`gguf_to_hf_dir(path)` reads a llama.cpp GGUF file with the `gguf` package, dequantises every tensor
to fp32 (`gguf.quants.dequantize`), undoes llama.cpp's layout changes and writes a directory that
the safetensors loader reads like any Hugging Face checkpoint:

- config.json / generation_config.json in Hugging Face field names;
- model.safetensors (or shards plus model.safetensors.index.json) in HF tensor names;
- tokenizer.json, tokenizer_config.json, chat_template.jinja from transformers' own GGUF tokenizer
  conversion (when the file carries tokenizer metadata).

Supported GGUF architectures: llama (Llama 2/3, SmolLM2, Mistral stored as llama), qwen2, qwen3.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

CONVERTER_VERSION = "1"
DEFAULT_CACHE_ROOT = Path.home() / ".cache" / "tachyon" / "gguf"
_SHARD_BYTES = 4 << 30  # fp32 bytes per safetensors shard

# GGUF architecture -> (HF architectures entry, HF model_type)
SUPPORTED_ARCHITECTURES: dict[str, tuple[str, str]] = {
    "llama": ("LlamaForCausalLM", "llama"),
    "qwen2": ("Qwen2ForCausalLM", "qwen2"),
    "qwen3": ("Qwen3ForCausalLM", "qwen3"),
}
_DEFAULT_ROPE_THETA = 10000.0
_DEFAULT_RMS_EPS = 1e-6


def gguf_to_hf_dir(path: str, cache_dir: str | None = None) -> str:
    """Convert the GGUF file at `path` once and return the path of its Hugging Face-style directory.

    The directory is `<cache_dir or ~/.cache/tachyon/gguf>/<key>`, the key derived from the file's
    absolute path, size, mtime and CONVERTER_VERSION. It is built in a temporary sibling and renamed
    into place, so it either exists complete or not at all; later calls return it without reading
    the file. Raises ValueError for a missing, truncated or corrupt file and for an unsupported
    architecture, naming the file.
    """
    src = Path(path).expanduser().resolve()
    if not src.is_file():
        raise ValueError(f"GGUF file not found: {path}")
    root = (Path(cache_dir).expanduser() if cache_dir is not None else DEFAULT_CACHE_ROOT).resolve()
    out = root / _cache_key(src)
    if (out / "config.json").is_file():
        return str(out)

    reader = _open_reader(src)
    arch = _architecture(reader, src)
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=root))
    try:
        config = _build_config(reader, arch, src)
        _write_weights(reader, arch, config, src, tmp)
        _write_json(tmp / "config.json", config)
        _write_json(tmp / "generation_config.json", _generation_config(reader, config))
        if "tokenizer.ggml.model" in reader.fields:
            _write_tokenizer(src, tmp)
        del reader  # release the memory map before publishing
        _publish(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return str(out)


# ----------------------------------------------------------------------------------------- cache


def _cache_key(src: Path) -> str:
    st = src.stat()
    ident = f"{src}\0{st.st_size}\0{st.st_mtime_ns}\0{CONVERTER_VERSION}"
    return f"{src.stem}-{hashlib.sha256(ident.encode()).hexdigest()[:16]}"


def _publish(tmp: Path, out: Path) -> None:
    """Atomically move the finished `tmp` to `out`; a concurrent converter that won the race wins."""
    for f in tmp.iterdir():  # mkdtemp and safetensors create owner-only files; the cache may be shared
        f.chmod(0o644)
    tmp.chmod(0o755)
    try:
        os.rename(tmp, out)
    except OSError:
        if not (out / "config.json").is_file():
            raise


def _write_json(path: Path, obj: dict[str, Any]) -> None:
    path.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n", encoding="utf-8")


# ---------------------------------------------------------------------------------------- reading


def _open_reader(src: Path):
    """GGUFReader over `src`, with every tensor checked to lie inside the file."""
    from gguf import GGUFReader

    try:
        reader = GGUFReader(src)
    except Exception as e:  # the reader fails in many ways (mmap, reshape, struct) on a bad file
        raise ValueError(f"GGUF file {src} is truncated or corrupt: {type(e).__name__}: {e}") from e
    size = src.stat().st_size
    for t in reader.tensors:
        if t.data_offset + t.n_bytes > size:
            raise ValueError(
                f"GGUF file {src} is truncated: tensor {t.name} ends at byte {t.data_offset + t.n_bytes}, "
                f"file has {size} bytes"
            )
    return reader


def _meta(reader, key: str, default: Any = None) -> Any:
    field = reader.fields.get(key)
    return default if field is None else field.contents()


def _f32(value: Any) -> float:
    """A float32 metadata value as its shortest decimal (1e-05, not 9.999999747378752e-06)."""
    return float(str(np.float32(value)))


def _architecture(reader, src: Path) -> str:
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


def _build_config(reader, arch: str, src: Path) -> dict[str, Any]:
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


def _generation_config(reader, config: dict[str, Any]) -> dict[str, Any]:
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


# ---------------------------------------------------------------------------------------- weights


def _tensor_name_map(arch: str, n_layers: int) -> dict[str, str]:
    """GGUF tensor name -> HF tensor name (without the .weight/.bias suffix)."""
    from gguf import MODEL_TENSOR as T
    from gguf import TENSOR_NAMES

    top = {T.TOKEN_EMBD: "model.embed_tokens", T.OUTPUT_NORM: "model.norm", T.OUTPUT: "lm_head"}
    block = {
        T.ATTN_NORM: "input_layernorm",
        T.ATTN_Q: "self_attn.q_proj",
        T.ATTN_K: "self_attn.k_proj",
        T.ATTN_V: "self_attn.v_proj",
        T.ATTN_OUT: "self_attn.o_proj",
        T.FFN_NORM: "post_attention_layernorm",
        T.FFN_GATE: "mlp.gate_proj",
        T.FFN_UP: "mlp.up_proj",
        T.FFN_DOWN: "mlp.down_proj",
    }
    if arch == "qwen3":
        block |= {T.ATTN_Q_NORM: "self_attn.q_norm", T.ATTN_K_NORM: "self_attn.k_norm"}
    names = {TENSOR_NAMES[t]: hf for t, hf in top.items()}
    for i in range(n_layers):
        names |= {TENSOR_NAMES[t].format(bid=i): f"model.layers.{i}.{hf}" for t, hf in block.items()}
    return names


def _unpermute_rope_rows(w: np.ndarray, n_head: int) -> np.ndarray:
    """Inverse of llama.cpp's q/k row permutation for llama.

    llama.cpp reorders the rows of each head from [first half | second half] (HF's rotate-half
    rotary) to interleaved pairs; this restores HF's order. Works on weights and biases.
    """
    rows = w.shape[0]
    return w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _write_weights(reader, arch: str, config: dict[str, Any], src: Path, out: Path) -> None:
    """Dequantise every tensor to fp32 in HF naming and write safetensors (sharded past 4 GiB)."""
    from gguf import dequantize
    from safetensors.numpy import save_file

    names = _tensor_name_map(arch, config["num_hidden_layers"])
    plan: list[list] = [[]]
    shard_bytes = 0
    for t in reader.tensors:
        if t.name == "rope_freqs.weight":  # folded into config["rope_scaling"]
            continue
        base, _, suffix = t.name.rpartition(".")
        if base not in names or suffix not in ("weight", "bias"):
            raise ValueError(f"GGUF file {src}: unexpected tensor {t.name} for architecture {arch}")
        nbytes = int(t.n_elements) * 4
        if plan[-1] and shard_bytes + nbytes > _SHARD_BYTES:
            plan.append([])
            shard_bytes = 0
        plan[-1].append(t)
        shard_bytes += nbytes

    n_shards = len(plan)
    weight_map: dict[str, str] = {}
    for k, shard in enumerate(plan):
        fname = "model.safetensors" if n_shards == 1 else f"model-{k + 1:05d}-of-{n_shards:05d}.safetensors"
        arrays: dict[str, np.ndarray] = {}
        for t in shard:
            base, _, suffix = t.name.rpartition(".")
            hf_name = f"{names[base]}.{suffix}"
            try:
                w = dequantize(t.data, t.tensor_type)
            except NotImplementedError as e:
                raise ValueError(
                    f"GGUF file {src}: tensor {t.name} has unsupported type {t.tensor_type.name}"
                ) from e
            w = np.asarray(w, dtype=np.float32).reshape([int(d) for d in reversed(t.shape)])
            if arch == "llama" and base.endswith((".attn_q", ".attn_k")):
                is_q = base.endswith(".attn_q")
                n_head = config["num_attention_heads"] if is_q else config["num_key_value_heads"]
                w = _unpermute_rope_rows(w, n_head)
            arrays[hf_name] = np.ascontiguousarray(w)
            weight_map[hf_name] = fname
        save_file(arrays, str(out / fname), metadata={"format": "pt"})
        del arrays
    if n_shards > 1:
        total = sum(int(t.n_elements) * 4 for shard in plan for t in shard)
        _write_json(out / "model.safetensors.index.json",
                    {"metadata": {"total_size": total}, "weight_map": weight_map})


# -------------------------------------------------------------------------------------- tokenizer


def _write_tokenizer(src: Path, out: Path) -> None:
    """Tokenizer files and chat template via transformers' GGUF tokenizer conversion."""
    from transformers import AutoTokenizer

    # A private directory holding only a link to the file, so nothing else beside the GGUF
    # (a stray tokenizer_config.json, say) leaks into the conversion.
    with tempfile.TemporaryDirectory(prefix="tachyon-gguf-tok-") as d:
        link = Path(d) / "model.gguf"
        try:
            link.symlink_to(src)
        except OSError:
            shutil.copyfile(src, link)
        try:
            tokenizer = AutoTokenizer.from_pretrained(d, gguf_file=link.name)
        except Exception as e:
            raise ValueError(f"GGUF file {src}: tokenizer conversion failed: {type(e).__name__}: {e}") from e
        tokenizer.save_pretrained(str(out))
    with contextlib.suppress(FileNotFoundError):  # drop what only describes this conversion run
        cfg_path = out / "tokenizer_config.json"
        cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
        for key in ("vocab_file", "name_or_path", "is_local", "local_files_only"):
            cfg.pop(key, None)
        _write_json(cfg_path, cfg)
