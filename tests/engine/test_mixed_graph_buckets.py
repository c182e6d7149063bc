"""The mixed CUDA graphs' buckets: the capacity a decode bucket leaves for a chunk, the warm-up's compile keys,
and the bucket knobs' validation (CPU; no graph is captured)."""

import pytest
import torch

from tachyon import LLM
from tachyon.engine.mixed_graph import MixedGraphRunner


def test_capacity_counts_the_decode_buckets_padding(tiny_qwen3):
    r = LLM(tiny_qwen3, device="cpu", dtype="float32", max_model_len=128, block_size=4).engine.runner
    mixed = MixedGraphRunner(r.model, max_decodes=8, max_chunk=16, max_model_len=r.max_model_len,
                             block_size=r.block_size, vocab_size=r.spec.vocab_size, device=r.device,
                             last_tokens=torch.zeros(10, dtype=torch.int64), use_graphs=False)
    mixed.decode_buckets, mixed.chunk_buckets = [4, 8], [8, 16]
    assert [mixed.capacity(d) for d in (1, 3, 4, 5, 8)] == [19, 17, 16, 19, 16]


@pytest.mark.parametrize("attn", ["one", "two"])
def test_compile_keys_cover_every_bucket(attn, monkeypatch):
    """The keys the warm-up's compile pass runs (`compile_keys`) are fewer than all keys, yet every decode bucket and
    every chunk bucket is in one of them (the two-launch kernels' and the row-count specialisations' variants follow
    one side each). The one-launch kernel's launch choices take no step argument at all (`mixed_tiles`: dtype and
    head group), so any key compiles its one variant (a variant per key once cost a cold H200 7B start-up 46-81 s)."""
    import inspect
    from types import SimpleNamespace

    from tachyon.engine.mixed_graph import CHUNK_BUCKETS, DECODE_BUCKETS
    from tachyon.kernels.attention_mixed import mixed_tiles

    monkeypatch.setenv("TACHYON_MIXED_ATTN", attn)
    runner = SimpleNamespace(decode_buckets=list(DECODE_BUCKETS), chunk_buckets=list(CHUNK_BUCKETS))
    compiled = MixedGraphRunner.compile_keys(runner)
    assert len(compiled) < len(DECODE_BUCKETS) * len(CHUNK_BUCKETS)
    assert {d for d, _ in compiled} == set(DECODE_BUCKETS) and {c for _, c in compiled} == set(CHUNK_BUCKETS)
    assert list(inspect.signature(mixed_tiles).parameters) == ["dtype", "group"]


@pytest.mark.parametrize("value", ["64,abc", "0,64", "-32"])
def test_bucket_knobs_reject_what_is_not_a_size(value, monkeypatch):
    """TACHYON_MIXED_CHUNK_BUCKETS and TACHYON_DECODE_BUCKETS: sorted unique sizes, and an error naming the variable
    for anything that is not an integer >= 1."""
    from tachyon.engine.cuda_graph import bucket_sizes
    from tachyon.engine.mixed_graph import CHUNK_BUCKETS, chunk_bucket_sizes

    assert chunk_bucket_sizes() == CHUNK_BUCKETS
    monkeypatch.setenv("TACHYON_MIXED_CHUNK_BUCKETS", "128,64,128")
    assert chunk_bucket_sizes() == (64, 128)
    for var, read in (("TACHYON_MIXED_CHUNK_BUCKETS", chunk_bucket_sizes), ("TACHYON_DECODE_BUCKETS", bucket_sizes)):
        monkeypatch.setenv(var, value)
        with pytest.raises(ValueError, match=f"{var} must be comma-separated integers >= 1"):
            read()
