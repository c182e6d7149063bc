"""What sizes the KV cache, and that the CUDA kernel warm-up runs whichever way it is sized (a cache sized by
`num_kv_blocks` once skipped it, and batch-1 decode fell back from the tuned GEMVs to cuBLAS: 859 against 1,515
tok/s on Qwen3-0.6B). Driven through stand-ins: the CPU has no CUDA memory to profile."""

from types import SimpleNamespace

import pytest
import torch

from tachyon.engine.engine import LLMEngine


class RecordingRunner:
    def __init__(self):
        self.calls = []

    def warm_up(self, budget):
        self.calls.append(("warm_up", budget))

    def profile_kv_budget(self, budget, utilization):
        self.calls.append(("profile", budget, utilization))
        return 10 * 2**20


def _engine(device: str, num_kv_blocks: int | None):
    config = SimpleNamespace(num_kv_blocks=num_kv_blocks, max_num_batched_tokens=8192, gpu_memory_utilization=0.9,
                             block_size=16, kv_cache_memory_gb=0.5)
    spec = SimpleNamespace(num_layers=2, num_kv_heads=2, head_dim=64)
    return SimpleNamespace(device=torch.device(device), config=config, runner=RecordingRunner(), spec=spec,
                           kv_dtype=torch.float16)


@pytest.mark.parametrize("num_kv_blocks", [None, 123])
def test_cuda_warm_up_runs_however_the_cache_is_sized(num_kv_blocks):
    eng = _engine("cuda", num_kv_blocks)
    blocks = LLMEngine._num_blocks(eng)
    per_block = 2 * 2 * 16 * 2 * 64 * 2  # K and V, layers, tokens, heads, head_dim, fp16 bytes
    assert blocks == (num_kv_blocks or (10 * 2**20) // per_block)
    expected = [("warm_up", 8192)] + ([] if num_kv_blocks else [("profile", 8192, 0.9)])
    assert eng.runner.calls == expected  # warm-up first, before the profile measures what is left


@pytest.mark.parametrize("num_kv_blocks", [None, 7])
def test_cpu_sizes_the_cache_without_a_profile(num_kv_blocks):
    eng = _engine("cpu", num_kv_blocks)
    per_block = 2 * 2 * 16 * 2 * 64 * 2
    assert LLMEngine._num_blocks(eng) == (num_kv_blocks or int(0.5 * 2**30) // per_block)
    assert eng.runner.calls == []
