"""Bad input raises ValueError naming the field and the limit."""

import json
import shutil

import pytest

from tachyon import LLM, SamplingParams


@pytest.mark.parametrize("kwargs,match", [
    (dict(max_tokens=0), "max_tokens"),
    (dict(top_p=0.0), "top_p"),
    (dict(top_p=1.5), "top_p"),
    (dict(temperature=-0.1), "temperature"),
    (dict(temperature=float("nan")), "temperature"),
    (dict(n=0), "n must"),
    (dict(logprobs=21), r"logprobs.*20"),
    (dict(min_tokens=5, max_tokens=2), "min_tokens"),
    (dict(stop=[""]), "stop"),
    (dict(logit_bias={-1: 1.0}), "logit_bias keys"),
    (dict(logit_bias={True: 1.0}), "logit_bias keys"),
    (dict(logit_bias={5: 100.5}), r"logit_bias values must be in \[-100, 100\]"),
    (dict(logit_bias={5: float("inf")}), "logit_bias must be a finite number"),
    (dict(logit_bias={i: 1.0 for i in range(301)}), "at most 300 entries"),
    # values the sampler's fp32 / int32 tensors cannot hold: each used to fail every request of its batch
    (dict(repetition_penalty=1e-300), r"repetition_penalty must be in \[0.01, 100.0\]"),
    (dict(repetition_penalty=1e300), r"repetition_penalty must be in \[0.01, 100.0\]"),
    (dict(repetition_penalty=0.0), r"repetition_penalty must be in \[0.01, 100.0\]"),
    (dict(top_k=2**63), r"top_k must be .* <= 2147483647"),
])
def test_sampling_params_reject(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SamplingParams(**kwargs)


def test_empty_and_too_long_prompts(llm):
    with pytest.raises(ValueError, match="prompt must not be empty"):
        llm.generate([""], use_tqdm=False)
    with pytest.raises(ValueError, match="prompt must not be empty"):
        llm.generate([[]], use_tqdm=False)
    with pytest.raises(ValueError, match=r"max_model_len \(256\)"):
        llm.generate([[5] * 300], use_tqdm=False)
    with pytest.raises(ValueError, match=r"token ids must be in \[0, 49152\)"):
        llm.generate([[5, 49152]], use_tqdm=False)
    with pytest.raises(ValueError, match=r"logit_bias: token id 49152 is out of range \[0, 49152\)"):
        llm.generate([[5, 6]], SamplingParams(logit_bias={3: 1.0, 49152: 1.0}), use_tqdm=False)
    assert not llm.engine.has_unfinished()


def test_unknown_model_path():
    with pytest.raises(ValueError, match="does not exist"):
        LLM("/nonexistent/model/dir", device="cpu")


def test_unknown_engine_argument():
    with pytest.raises(ValueError, match="unknown engine argument"):
        LLM(None, device="cpu", not_a_flag=1)


@pytest.mark.parametrize("kwargs,match", [
    (dict(mixed_graph_max_tokens=-1), r"mixed_graph_max_tokens must be in \[0, 8192\], got -1"),
    (dict(mixed_graph_max_tokens=8193), r"mixed_graph_max_tokens must be in \[0, 8192\], got 8193"),
    (dict(prefill_graph_max_tokens=9000), r"prefill_graph_max_tokens must be in \[0, 8192\]"),
])
def test_graph_token_limits(kwargs, match):
    from tachyon.config import EngineConfig

    with pytest.raises(ValueError, match=match):
        EngineConfig(**kwargs)


def test_unsupported_architecture(tmp_path, tiny_llama):
    d = tmp_path / "m"
    shutil.copytree(tiny_llama, d)
    cfg = json.loads((d / "config.json").read_text())
    cfg["architectures"] = ["GPT2LMHeadModel"]
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match="unsupported architecture.*GPT2LMHeadModel"):
        LLM(str(d), device="cpu")


def test_truncated_weight_file(tmp_path, tiny_llama):
    d = tmp_path / "m"
    shutil.copytree(tiny_llama, d)
    w = d / "model.safetensors"
    data = w.read_bytes()
    w.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="truncated or corrupt"):
        LLM(str(d), device="cpu")


def test_max_model_len_beyond_cache(tiny_llama):
    with pytest.raises(ValueError, match="KV cache holds 64 tokens"):
        LLM(tiny_llama, device="cpu", num_kv_blocks=4, block_size=16, max_model_len=128)


def test_hf_config_overrides_apply(tiny_llama):
    llm = LLM(tiny_llama, device="cpu", hf_config_overrides={"max_position_embeddings": 128})
    assert llm.engine.max_model_len == 128
    with pytest.raises(ValueError, match="exceeds the model's limit of 128"):
        LLM(tiny_llama, device="cpu", max_model_len=256, hf_config_overrides={"max_position_embeddings": 128})


def test_prompt_token_ids_as_arrays_tensors_and_tuples(llm):
    """Token ids may come as a tuple, numpy ints, a 1-D integer numpy array or torch tensor (alone, in a list, in a
    prompt dict, or as the rows of a 2-D one): the same tokens as the plain list. Floats, bools and other shapes
    are refused naming the prompt."""
    import numpy as np
    import torch

    sp = SamplingParams(temperature=0, max_tokens=4, ignore_eos=True)
    ids = [5, 6, 7, 8]
    want = llm.generate([ids], sp, use_tqdm=False)[0].outputs[0].token_ids
    forms = [tuple(ids), np.array(ids), torch.tensor(ids, dtype=torch.int32), [np.int64(t) for t in ids],
             {"prompt_token_ids": np.array(ids)}]
    for form in forms:
        assert llm.generate(form, sp, use_tqdm=False)[0].outputs[0].token_ids == want, type(form)
        assert llm.generate([form], sp, use_tqdm=False)[0].outputs[0].token_ids == want, type(form)
    rows = llm.generate(np.array([ids, ids]), sp, use_tqdm=False)
    assert [o.outputs[0].token_ids for o in rows] == [want, want]
    for bad in ([[5.0, 6.0]], [[True, False]], [np.array([5.0, 6.0])], [torch.tensor([[5, 6]])], [[[5]]]):
        with pytest.raises(ValueError, match="prompt must be a string or a list of token ids"):
            llm.generate(bad, sp, use_tqdm=False)


def test_token_id_list_forms():
    """token_id_list: a plain int list comes back as a copy; mixed int kinds (numpy ints, int subclasses) become
    Python ints; a bool or a float anywhere in the list refuses it."""
    import enum

    import numpy as np

    from tachyon.engine.engine import token_id_list

    class Tok(enum.IntEnum):
        A = 3

    ids = [5, 6, 7]
    out = token_id_list(ids)
    assert out == ids and out is not ids
    mixed = token_id_list([5, np.int32(6), Tok.A])
    assert mixed == [5, 6, 3] and all(type(t) is int for t in mixed)
    assert token_id_list(()) == []
    for bad in ([5, True], [5, 6.0], [5, "6"], [[5]], [5, None]):
        assert token_id_list(bad) is None, bad
