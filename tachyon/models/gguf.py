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
import glob
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from tachyon.models import gguf_config

CONVERTER_VERSION = "2"  # 2: special tokens from the file's metadata
DEFAULT_CACHE_ROOT = Path.home() / ".cache" / "tachyon" / "gguf"
SOURCE_FILE = "tachyon_source.json"  # in each conversion: the GGUF path it was made from (for pruning)
_SHARD_BYTES = 4 << 30  # fp32 bytes per safetensors shard



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
    arch = gguf_config.architecture(reader, src)
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=root))
    try:
        config = gguf_config.build_config(reader, arch, src)
        _write_weights(reader, arch, config, src, tmp)
        _write_json(tmp / "config.json", config)
        _write_json(tmp / "generation_config.json", gguf_config.generation_config(reader, config))
        if "tokenizer.ggml.model" in reader.fields:
            _write_tokenizer(src, tmp, gguf_config.special_token_ids(reader))
        _write_json(tmp / SOURCE_FILE, {"path": str(src)})
        del reader  # release the memory map before publishing
        _publish(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _prune_stale(root, src, keep=out)
    return str(out)


# ----------------------------------------------------------------------------------------- cache


def _cache_key(src: Path) -> str:
    st = src.stat()
    ident = f"{src}\0{st.st_size}\0{st.st_mtime_ns}\0{CONVERTER_VERSION}"
    return f"{src.stem}-{hashlib.sha256(ident.encode()).hexdigest()[:16]}"


def _prune_stale(root: Path, src: Path, keep: Path) -> None:
    """Remove the conversions of `src`'s path other than `keep`: made from an earlier size or mtime of the file,
    or by an earlier CONVERTER_VERSION, none of which a later call can return (each is ~4 bytes a parameter).
    Conversions of other paths are kept, and so are those of converters that wrote no SOURCE_FILE. A process
    that loaded a removed directory keeps its open files."""
    for entry in root.glob(f"{glob.escape(src.stem)}-*/{SOURCE_FILE}"):
        d = entry.parent
        if d == keep:
            continue
        with contextlib.suppress(OSError, ValueError):
            if json.loads(entry.read_text(encoding="utf-8")).get("path") == str(src):
                shutil.rmtree(d, ignore_errors=True)


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


def write_tokenizer(path: str | Path, out: str | Path) -> None:
    """The tokenizer files of the GGUF file at `path` (as `convert` writes them) into the directory `out`."""
    src = Path(path).expanduser().resolve()
    _write_tokenizer(src, Path(out), gguf_config.special_token_ids(_open_reader(src)))


def _write_tokenizer(src: Path, out: Path, special: dict[str, int]) -> None:
    """Tokenizer files and chat template via transformers' GGUF tokenizer conversion, with the special tokens
    (`special`: attribute -> id) the file names: transformers 5.17's conversion made SmolLM2's eos <|im_start|>
    (id 1) where the file says 2, <|im_end|>, so structured outputs and chat ended on the wrong token."""
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
        for attr, token_id in special.items():
            if 0 <= token_id < len(tokenizer):
                setattr(tokenizer, attr, tokenizer.convert_ids_to_tokens(token_id))
        tokenizer.save_pretrained(str(out))
    with contextlib.suppress(FileNotFoundError):  # drop what only describes this conversion run
        cfg_path = out / "tokenizer_config.json"
        cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
        for key in ("vocab_file", "name_or_path", "is_local", "local_files_only"):
            cfg.pop(key, None)
        _write_json(cfg_path, cfg)
