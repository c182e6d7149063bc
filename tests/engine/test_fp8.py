"""quantization="fp8" end to end: greedy tokens equal transformers `generate` on the same checkpoint with every
decoder projection fake-quantized the W8A8 way (weights per output channel, inputs per row, e4m3), written
here independently of tachyon's kernels."""

import random

import pytest
import torch

from tachyon import LLM, SamplingParams
from tests.hf_oracle import hf_greedy

NEW_TOKENS = 8
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def _fake_e4m3(x: torch.Tensor) -> torch.Tensor:
    """Per-row e4m3 quantize-dequantize in float64 arithmetic (scale = row |max| / 448)."""
    xd = x.double()
    amax = xd.abs().amax(dim=-1, keepdim=True).clamp(min=1e-12)
    q = (xd * (448.0 / amax)).clamp(-448, 448).float().to(torch.float8_e4m3fn)
    return (q.double() * (amax / 448.0)).to(x.dtype)


def _hf_w8a8(path: str):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    model.generation_config.eos_token_id = None
    n = 0
    for name, mod in model.named_modules():
        if name.rsplit(".", 1)[-1] in PROJECTIONS:
            mod.weight.data = _fake_e4m3(mod.weight.data)
            mod.register_forward_pre_hook(lambda _m, args: (_fake_e4m3(args[0]),) + tuple(args[1:]))
            n += 1
    assert n == 7 * model.config.num_hidden_layers
    return model


@pytest.mark.parametrize("arch", ["qwen2", "qwen3"])  # qkv bias; per-head q/k norm and a tied lm_head
def test_fp8_greedy_matches_fake_quantized_transformers(arch):
    from tests.tiny_models import tiny_model_dir

    path = tiny_model_dir(arch)
    rng = random.Random(11)
    prompts = [[rng.randrange(3, 49152) for _ in range(rng.randint(4, 30))] for _ in range(6)]
    hf = _hf_w8a8(path)
    expected = [hf_greedy(hf, p, NEW_TOKENS) for p in prompts]
    llm = LLM(path, device="cpu", dtype="float32", quantization="fp8")
    layer = llm.engine.model.layers[0]
    assert layer.self_attn.qkv_proj.weight.dtype == torch.float8_e4m3fn
    assert layer.mlp.down_proj.weight.dtype == torch.float8_e4m3fn
    assert llm.engine.model.lm_head.weight.dtype == torch.float32  # the output projection stays unquantized
    params = SamplingParams(temperature=0.0, max_tokens=NEW_TOKENS, ignore_eos=True)
    got = [o.outputs[0].token_ids for o in llm.generate(prompts, params, use_tqdm=False)]
    assert got == expected
    # the first token's log-prob: the fake-quantized oracle's to fp32 rounding, and measurably not the
    # unquantized model's (else the check above would be blind to a missing quantization)
    out = llm.generate([prompts[0]], SamplingParams(temperature=0.0, max_tokens=1, logprobs=1),
                       use_tqdm=False)[0].outputs[0]
    tok = out.token_ids[0]
    lp = out.logprobs[0][tok].logprob
    lp_w8a8 = float(torch.log_softmax(_last_logits(hf, prompts[0]), -1)[tok])
    lp_plain = float(torch.log_softmax(_last_logits(_hf_plain(path), prompts[0]), -1)[tok])
    assert abs(lp - lp_w8a8) < 1e-4
    assert abs(lp - lp_plain) > 1e-3


def _hf_plain(path: str):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()


def _last_logits(model, ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0, -1].float()


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
