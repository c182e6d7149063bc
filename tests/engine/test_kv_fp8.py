"""kv_cache_dtype="fp8" end to end: greedy tokens equal transformers `generate` on the same checkpoint with an
attention function that rounds every key and value (after the rotary, as the cache holds them) to e4m3 with
saturation, written here independently of tachyon's kernels; alone and with quantization="fp8"."""

import random

import pytest
import torch

from tachyon import LLM
from tests.engine.fp8_oracle import first_token_logprob, greedy, hf_fp8_model, last_logprob
from tests.hf_oracle import assert_greedy_parity, hf_greedy

NEW_TOKENS = 8
FP8 = torch.float8_e4m3fn


@pytest.mark.parametrize("arch,w8a8", [("qwen2", False), ("qwen3", False), ("qwen3", True)])
def test_fp8_kv_cache_greedy_matches_transformers_with_e4m3_keys_and_values(arch, w8a8):
    from tests.tiny_models import tiny_model_dir

    path = tiny_model_dir(arch)
    rng = random.Random(17)
    prompts = [[rng.randrange(3, 49152) for _ in range(rng.randint(4, 40))] for _ in range(6)]
    hf = hf_fp8_model(path, w8a8=w8a8, fp8_kv=True)
    expected = [hf_greedy(hf, p, NEW_TOKENS) for p in prompts]
    llm = LLM(path, device="cpu", dtype="float32", kv_cache_dtype="fp8", quantization="fp8" if w8a8 else None,
              block_size=4)  # several blocks per prompt: the cache's paging is exercised
    assert all(c.dtype == FP8 for c in llm.engine.runner.kv_caches)
    assert_greedy_parity(hf, prompts, greedy(llm, prompts, NEW_TOKENS), expected)
    # the first token's log-prob: the e4m3-KV oracle's, and measurably not the model's with an unrounded cache
    # (else the token check would be blind to a cache that is not quantized)
    tok, lp = first_token_logprob(llm, prompts[0])
    assert abs(lp - last_logprob(hf, prompts[0], tok)) < 1e-4
    assert abs(lp - last_logprob(hf_fp8_model(path, w8a8=w8a8), prompts[0], tok)) > 1e-4


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
