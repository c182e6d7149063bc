"""quantization="fp8" end to end: greedy tokens equal transformers `generate` on the same checkpoint with every
decoder projection fake-quantized the W8A8 way (weights per output channel, inputs per row, e4m3), written
here independently of tachyon's kernels."""

import random

import pytest
import torch

from tachyon import LLM
from tests.engine.fp8_oracle import first_token_logprob, greedy, hf_fp8_model, last_logprob
from tests.hf_oracle import assert_greedy_parity, hf_greedy

NEW_TOKENS = 8


@pytest.mark.parametrize("arch", ["qwen2", "qwen3"])  # qkv bias; per-head q/k norm and a tied lm_head
def test_fp8_greedy_matches_fake_quantized_transformers(arch):
    from tests.tiny_models import tiny_model_dir

    path = tiny_model_dir(arch)
    rng = random.Random(11)
    prompts = [[rng.randrange(3, 49152) for _ in range(rng.randint(4, 30))] for _ in range(6)]
    hf = hf_fp8_model(path, w8a8=True)
    expected = [hf_greedy(hf, p, NEW_TOKENS) for p in prompts]
    llm = LLM(path, device="cpu", dtype="float32", quantization="fp8")
    layer = llm.engine.model.layers[0]
    assert layer.self_attn.qkv_proj.weight.dtype == torch.float8_e4m3fn
    assert layer.mlp.down_proj.weight.dtype == torch.float8_e4m3fn
    assert llm.engine.model.lm_head.weight.dtype == torch.float32  # the output projection stays unquantized
    assert_greedy_parity(hf, prompts, greedy(llm, prompts, NEW_TOKENS), expected)
    # the first token's log-prob: the fake-quantized oracle's to fp32 rounding, and measurably not the
    # unquantized model's (else the check above would be blind to a missing quantization)
    tok, lp = first_token_logprob(llm, prompts[0])
    assert abs(lp - last_logprob(hf, prompts[0], tok)) < 1e-4
    assert abs(lp - last_logprob(hf_fp8_model(path), prompts[0], tok)) > 1e-3


def test_quantization_argument_is_validated():
    with pytest.raises(ValueError, match="quantization"):
        LLM(device="cpu", quantization="int4")


def test_engine_cli_flag_reaches_the_engine_config():
    import argparse

    from tachyon.config import EngineConfig
    from tachyon.engine.cli import add_engine_args, engine_kwargs

    p = argparse.ArgumentParser()
    add_engine_args(p)
    assert EngineConfig.from_kwargs(**engine_kwargs(p.parse_args(["--quantization", "fp8"]))).quantization == "fp8"
    assert engine_kwargs(p.parse_args([]))["quantization"] is None
    with pytest.raises(SystemExit):
        p.parse_args(["--quantization", "int4"])
