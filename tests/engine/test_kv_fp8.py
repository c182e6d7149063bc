"""kv_cache_dtype="fp8" end to end: greedy tokens equal transformers `generate` on the same checkpoint with an
attention function that rounds every key and value (after the rotary, as the cache holds them) to e4m3 with
saturation, written here independently of tachyon's kernels; alone and with quantization="fp8"."""

import random

import pytest
import torch

from tachyon import LLM, SamplingParams
from tests.engine.test_fp8 import PROJECTIONS, _fake_e4m3
from tests.hf_oracle import hf_greedy

NEW_TOKENS = 8
FP8 = torch.float8_e4m3fn


def _e4m3(x: torch.Tensor) -> torch.Tensor:
    """Each element to its nearest e4m3 value (scale 1, saturated at +-448), back in x's dtype."""
    return x.double().clamp(-448, 448).float().to(FP8).to(x.dtype)


def _register_fp8_kv_attention() -> str:
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    def fp8_kv_sdpa(module, query, key, value, attention_mask, **kw):
        return sdpa_attention_forward(module, query, _e4m3(key), _e4m3(value), attention_mask, **kw)

    AttentionInterface.register("test_fp8_kv_sdpa", fp8_kv_sdpa)
    return "test_fp8_kv_sdpa"


def _hf(path: str, fp8_kv: bool, w8a8: bool = False):
    from transformers import AutoModelForCausalLM

    impl = _register_fp8_kv_attention() if fp8_kv else "sdpa"
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation=impl).eval()
    model.generation_config.eos_token_id = None
    if w8a8:
        for name, mod in model.named_modules():
            if name.rsplit(".", 1)[-1] in PROJECTIONS:
                mod.weight.data = _fake_e4m3(mod.weight.data)
                mod.register_forward_pre_hook(lambda _m, args: (_fake_e4m3(args[0]),) + tuple(args[1:]))
    return model


def _first_logprob(model, ids: list[int], tok: int) -> float:
    with torch.no_grad():
        return float(torch.log_softmax(model(torch.tensor([ids])).logits[0, -1].float(), -1)[tok])


@pytest.mark.parametrize("arch,w8a8", [("qwen2", False), ("qwen3", False), ("qwen3", True)])
def test_fp8_kv_cache_greedy_matches_transformers_with_e4m3_keys_and_values(arch, w8a8):
    from tests.tiny_models import tiny_model_dir

    path = tiny_model_dir(arch)
    rng = random.Random(17)
    prompts = [[rng.randrange(3, 49152) for _ in range(rng.randint(4, 40))] for _ in range(6)]
    hf = _hf(path, fp8_kv=True, w8a8=w8a8)
    expected = [hf_greedy(hf, p, NEW_TOKENS) for p in prompts]
    llm = LLM(path, device="cpu", dtype="float32", kv_cache_dtype="fp8", quantization="fp8" if w8a8 else None,
              block_size=4)  # several blocks per prompt: the cache's paging is exercised
    assert all(c.dtype == FP8 for c in llm.engine.runner.kv_caches)
    params = SamplingParams(temperature=0.0, max_tokens=NEW_TOKENS, ignore_eos=True)
    got = [o.outputs[0].token_ids for o in llm.generate(prompts, params, use_tqdm=False)]
    assert got == expected
    # the first token's log-prob: the e4m3-KV oracle's, and measurably not the model's with an unrounded cache
    # (else the token check would be blind to a cache that is not quantized)
    out = llm.generate([prompts[0]], SamplingParams(temperature=0.0, max_tokens=1, logprobs=1),
                       use_tqdm=False)[0].outputs[0]
    tok = out.token_ids[0]
    lp = out.logprobs[0][tok].logprob
    assert abs(lp - _first_logprob(hf, prompts[0], tok)) < 1e-4
    assert abs(lp - _first_logprob(_hf(path, fp8_kv=False, w8a8=w8a8), prompts[0], tok)) > 1e-4


def test_fp8_kv_cache_holds_four_times_the_fp32_tokens():
    """Same memory budget: an e4m3 cache gets 4x the blocks of an fp32 one (up to the budget's rounding)."""
    from tests.tiny_models import tiny_model_dir

    path = tiny_model_dir("qwen3")
    plain = LLM(path, device="cpu", dtype="float32", kv_cache_memory_gb=0.01)
    fp8 = LLM(path, device="cpu", dtype="float32", kv_cache_memory_gb=0.01, kv_cache_dtype="fp8")
    assert fp8.engine.runner.num_blocks // 4 == plain.engine.runner.num_blocks


def test_kv_cache_dtype_is_validated_and_reaches_the_config_from_the_clis():
    import argparse

    from tachyon.config import EngineConfig
    from tachyon.engine.cli import add_engine_args, engine_kwargs

    with pytest.raises(ValueError, match="kv_cache_dtype"):
        LLM(device="cpu", kv_cache_dtype="int8")
    p = argparse.ArgumentParser()
    add_engine_args(p)
    cfg = EngineConfig.from_kwargs(**engine_kwargs(p.parse_args(["--kv-cache-dtype", "fp8"])))
    assert cfg.kv_cache_dtype == "fp8"
    assert engine_kwargs(p.parse_args([]))["kv_cache_dtype"] == "auto"
    with pytest.raises(SystemExit):
        p.parse_args(["--kv-cache-dtype", "int8"])
