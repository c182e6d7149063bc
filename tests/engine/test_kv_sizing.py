"""What sizes the KV cache, and that the CUDA kernel warm-up runs whichever way it is sized (a cache sized by
`num_kv_blocks` once skipped it, and batch-1 decode fell back from the tuned GEMVs to cuBLAS: 859 against 1,515
tok/s on Qwen3-0.6B). Driven through stand-ins: the CPU has no CUDA memory to profile."""

from types import SimpleNamespace

import pytest
import torch

from tachyon.engine.engine import LLMEngine

PER_BLOCK = 2 * 2 * 16 * 2 * 64 * 2  # bytes: K and V, 2 layers, 16 tokens, 2 heads, head_dim 64, fp16


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
    blocks = LLMEngine._warm_up_and_size_cache(eng)
    assert blocks == (num_kv_blocks or (10 * 2**20) // PER_BLOCK)
    expected = [("warm_up", 8192)] + ([] if num_kv_blocks else [("profile", 8192, 0.9)])
    assert eng.runner.calls == expected  # warm-up first, before the profile measures what is left


@pytest.mark.parametrize("num_kv_blocks", [None, 7])
def test_cpu_sizes_the_cache_without_a_profile(num_kv_blocks):
    eng = _engine("cpu", num_kv_blocks)
    assert LLMEngine._warm_up_and_size_cache(eng) == (num_kv_blocks or int(0.5 * 2**30) // PER_BLOCK)
    assert eng.runner.calls == []


class FakeGraphs:
    """Stands in for a graph runner: records the pool it was given and 'captures' n graphs."""

    def __init__(self, n: int, twins: int = 0):
        self.n, self.twins, self.pool_given = n, twins, "unset"
        self.graphs, self.unfiltered_graphs, self.pool = {}, {}, None

    def capture(self, pool=None):
        self.pool_given = pool
        self.graphs = {i: object() for i in range(self.n)}
        self.unfiltered_graphs = {i: object() for i in range(self.twins)}
        self.pool = pool if pool is not None else "decode-pool"


def test_allocate_kv_times_each_graph_family_and_shares_the_decode_pool(tiny_llama, monkeypatch):
    from tachyon import LLM

    runner = LLM(tiny_llama, device="cpu", dtype="float32", max_model_len=128, num_kv_blocks=16).engine.runner
    assert set(runner.capture_s) == {"kv_alloc_s"} and runner.num_graphs == {}  # CPU: no graphs
    fakes = dict(decode=FakeGraphs(5, twins=2), prefill=FakeGraphs(3), mixed=FakeGraphs(7))
    monkeypatch.setattr(runner, "_graph_runner", lambda: fakes["decode"])
    monkeypatch.setattr(runner, "_prefill_graph_runner", lambda: fakes["prefill"])
    monkeypatch.setattr(runner, "_mixed_graph_runner", lambda: fakes["mixed"])
    runner.use_cuda_graphs, runner.prefill_graph_tokens, runner.mixed_graph_tokens = True, 64, 63
    runner.allocate_kv(8)
    assert runner.kv_caches[0].shape[1] == 8
    assert fakes["decode"].pool_given is None  # the decode graphs make the pool; the others share it
    assert fakes["prefill"].pool_given == fakes["mixed"].pool_given == "decode-pool"
    assert runner.num_graphs == {"decode": 7, "prefill": 3, "mixed": 7}
    assert set(runner.capture_s) == {"kv_alloc_s", "decode_graphs_s", "prefill_graphs_s", "mixed_graphs_s"}
    assert all(v >= 0 for v in runner.capture_s.values())


def test_allocate_kv_loads_the_compile_pass_modules_after_the_cache_and_before_any_capture(tiny_llama, monkeypatch):
    """The compile pass's modules load once the cache is placed and before the first capture (which then needs no
    eager run); the load's seconds are a part of the phase."""
    from tachyon import LLM

    runner = LLM(tiny_llama, device="cpu", dtype="float32", max_model_len=128, num_kv_blocks=16).engine.runner
    events = []

    class FakePass:
        def __bool__(self):
            return True

        def load_modules(self):
            events.append(("load", len(runner.kv_caches[0][0])))
            return 3

    class RecordingGraphs(FakeGraphs):
        def capture(self, pool=None):
            events.append(("capture", self.n))
            super().capture(pool)

    monkeypatch.setattr(runner, "_graph_runner", lambda: RecordingGraphs(4))
    runner.use_cuda_graphs, runner.prefill_graph_tokens, runner.mixed_graph_tokens = True, 0, 0
    runner.compile_pass = FakePass()
    runner.allocate_kv(8)
    assert events == [("load", 8), ("capture", 4)]
    assert set(runner.capture_s) == {"kv_alloc_s", "module_load_s", "decode_graphs_s"}
    assert runner.eager_runs == {"decode": 0}
