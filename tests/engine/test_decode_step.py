"""DecodeGraphRunner's step body on CPU (uncaptured; reference kernels): rows with src >= 0 take their input
from last_tokens, the others from input_ids; the tokens are written into last_tokens[:bs] itself."""

import pytest
import torch

from tachyon.engine.batch import AttentionMetadata
from tachyon.engine.cuda_graph import DecodeGraphRunner
from tachyon.kernels.attention_config import decode_graph_order
from tachyon.models.loader import load_model, resolve_model
from tests.engine.order_spy import spy_decode_order


def test_decode_step_feeds_from_last_tokens(tiny_llama):
    model, spec = load_model(resolve_model(tiny_llama), dtype=torch.float32, device=torch.device("cpu"))
    bs, block = 3, 16
    model.bind_kv_cache([torch.zeros(2, 4, block, spec.num_kv_heads, spec.head_dim) for _ in range(spec.num_layers)])
    last_tokens = torch.tensor([11, 22, 33, 44], dtype=torch.int64)
    runner = DecodeGraphRunner(model, max_batch=4, max_model_len=64, block_size=block, vocab_size=spec.vocab_size,
                               device=torch.device("cpu"), last_tokens=last_tokens)
    h = runner.staging.host()
    runner._fill_padding(h, 0, 4)
    src = [2, -1, 0]
    h["input_ids"][:bs] = [5, 6, 7]
    h["src"][:bs] = src
    h["slots"][:bs] = [0, block, 2 * block]  # one block each, position 0
    h["block_tables"][:bs, 0] = [0, 1, 2]
    runner._upload(4)
    ids = torch.tensor([33, 6, 11])  # src >= 0: last_tokens[src]; else input_ids
    meta = AttentionMetadata(torch.arange(bs + 1, dtype=torch.int32), torch.ones(bs, dtype=torch.int32),
                             torch.tensor([0, block, 2 * block]), torch.arange(bs, dtype=torch.int32)[:, None], 1, 1,
                             True)
    with torch.inference_mode():
        want = model.compute_logits(model(ids, torch.zeros(bs, dtype=torch.int64), meta)).float()
        logits, tokens = runner._step(bs)
    torch.testing.assert_close(logits, want)
    assert tokens.data_ptr() == last_tokens.data_ptr() and tokens.shape == (bs,), "tokens are last_tokens[:bs]"
    assert torch.equal(tokens, want.argmax(-1))  # padding-style rows are greedy
    assert last_tokens[bs] == 44, "rows past the batch untouched"


def test_decode_step_writes_no_step_input_and_only_its_own_kv_slots(tiny_llama):
    """The contract the kernels' reads above their PDL wait rely on (docs/architecture.md, kernels/_triton.py
    pdl_wait): a decode step writes none of its step inputs (the staged buffers, query_start_loc) and, in the
    KV cache, only the slots of its own new tokens; earlier positions hold what earlier steps wrote."""
    model, spec = load_model(resolve_model(tiny_llama), dtype=torch.float32, device=torch.device("cpu"))
    bs, block = 3, 16
    gen = torch.Generator().manual_seed(0)
    caches = [torch.randn(2, 4, block, spec.num_kv_heads, spec.head_dim, generator=gen)
              for _ in range(spec.num_layers)]
    model.bind_kv_cache(caches)
    runner = DecodeGraphRunner(model, max_batch=4, max_model_len=64, block_size=block, vocab_size=spec.vocab_size,
                               device=torch.device("cpu"), last_tokens=torch.tensor([11, 22, 33, 44]))
    h = runner.staging.host()
    runner._fill_padding(h, 0, 4)
    h["input_ids"][:bs] = [5, 6, 7]
    h["src"][:bs] = [-1, -1, 1]
    h["positions"][:bs] = [4, 9, 2]  # contexts of 5, 10 and 3 keys, one block each
    h["seq_lens"][:bs] = [5, 10, 3]
    h["slots"][:bs] = [4, block + 9, 2 * block + 2]
    h["block_tables"][:bs, 0] = [0, 1, 2]
    h["temperature"][:bs] = [0.0, 0.7, 1.0]
    h["top_p"][:bs] = [1.0, 0.9, 1.0]
    runner._upload(4)
    inputs = {name: t.clone() for name, t in runner.staging.device.items()}
    qsl = runner.query_start_loc.clone()
    before = [c.clone() for c in caches]
    with torch.inference_mode():
        runner._step(bs)
    for name, t in runner.staging.device.items():
        assert torch.equal(t, inputs[name]), f"the step wrote its input {name}"
    assert torch.equal(runner.query_start_loc, qsl)
    own = torch.zeros(4 * block, dtype=torch.bool)
    own[[4, block + 9, 2 * block + 2]] = True
    for new, old in zip(caches, before):
        new, old = new.view(2, 4 * block, -1), old.view(2, 4 * block, -1)
        assert torch.equal(new[:, ~own], old[:, ~own]), "the step wrote KV slots other than its own tokens'"
        assert not torch.equal(new[:, own], old[:, own])


class _FakeGraph:
    def __init__(self, log: list, name: str):
        self.log, self.name = log, name

    def replay(self):
        self.log.append(self.name)


def test_run_replays_the_unfiltered_twin_only_when_every_row_allows(tiny_llama):
    """`run` picks the reduced-sampler twin of a bucket only if every request is greedy or unfiltered (the
    padding rows are greedy); any filtered row (top-k, top-p, min-p at a non-zero temperature) takes the full
    graph, as does a bucket without a twin; the outputs returned are the replayed graph's."""
    from tachyon import SamplingParams
    from tachyon.engine.request import Request

    model, spec = load_model(resolve_model(tiny_llama), dtype=torch.float32, device=torch.device("cpu"))
    runner = DecodeGraphRunner(model, max_batch=16, max_model_len=64, block_size=16, vocab_size=spec.vocab_size,
                               device=torch.device("cpu"), last_tokens=torch.zeros(16, dtype=torch.int64))
    log: list[str] = []
    for b in runner.buckets:
        runner.graphs[b] = _FakeGraph(log, f"full{b}")
        runner.outputs[b] = (torch.full((b, 3), float(b)), torch.full((b,), b))
        if b <= 8:
            runner.unfiltered_graphs[b] = _FakeGraph(log, f"twin{b}")
            runner.unfiltered_outputs[b] = (torch.full((b, 3), -float(b)), torch.full((b,), -b))

    def req(i: int, **kw) -> Request:
        r = Request(str(i), [3, 4, 5], SamplingParams(max_tokens=4, **kw), eos_token_ids=[], max_model_len=64,
                    sample_seed=i)
        r.block_ids = [i]
        return r

    plain = [dict(temperature=0.0, top_p=0.5), dict(temperature=0.8), dict(temperature=0.8, top_k=1),
             dict(temperature=1.2, top_k=0)]
    for kw in plain:
        logits, tokens = runner.run([req(0, **kw), req(1, temperature=0.0)], [-1, -1])
        assert log[-1] == "twin2" and tokens.tolist() == [-2, -2] and logits.shape == (2, 3)
    for kw in (dict(temperature=0.8, top_p=0.9), dict(temperature=0.8, top_k=5), dict(temperature=0.8, min_p=0.1)):
        runner.run([req(0, temperature=0.0), req(1, **kw), req(2, temperature=0.0)], [-1, -1, -1])
        assert log[-1] == "full4"
    _, tokens = runner.run([req(i, temperature=0.0) for i in range(9)], [-1] * 9)
    assert log[-1] == "full16" and tokens.tolist() == [16] * 9  # no twin above UNFILTERED_MAX_BATCH


def test_output_bytes_is_what_the_steps_keep(tiny_llama):
    """The memory profile adds `output_bytes` for the buckets it does not capture: the logits each bucket's step
    (and its unfiltered twin's) returns, which a captured graph keeps allocated in the pool."""
    model, spec = load_model(resolve_model(tiny_llama), dtype=torch.float32, device=torch.device("cpu"))
    model.bind_kv_cache([torch.zeros(2, 4, 16, spec.num_kv_heads, spec.head_dim) for _ in range(spec.num_layers)])
    runner = DecodeGraphRunner(model, max_batch=16, max_model_len=64, block_size=16, vocab_size=spec.vocab_size,
                               device=torch.device("cpu"), last_tokens=torch.zeros(16, dtype=torch.int64))
    runner._fill_padding(runner.staging.host(), 0, 16)  # every row padding (pad_inputs, without the CUDA sync)
    runner._upload(16)
    kept = {}
    with torch.inference_mode():
        for b in runner.buckets:
            kept[b] = runner._step(b)[0].nbytes
            if runner.has_twin(b):
                kept[b] += runner._step(b, unfiltered=True)[0].nbytes
    assert runner.output_bytes() == sum(kept.values())
    assert runner.output_bytes(runner.buckets[:-1]) == sum(kept.values()) - kept[16]


@pytest.mark.parametrize("max_model_len,kernel", [(64, "attention"), (2048, "decode_qkv_attention")])
def test_lpt_order_reaches_the_decode_kernel_longest_first(tiny_llama, monkeypatch, max_model_len, kernel):
    """TACHYON_DECODE_ORDER=lpt: `run` stages the bucket's sequences longest first (padding rows, one key each,
    last) and the step hands that order to the decode attention, the dedicated kernel (short max_model_len: the
    context is not split) or the fused one (split); a one-row bucket, batch and the default on a grid this small hand
    none.
    The logits do not depend on it."""
    from tachyon import SamplingParams
    from tachyon.engine.request import Request

    seen = spy_decode_order(monkeypatch, kernel)
    model, spec = load_model(resolve_model(tiny_llama), dtype=torch.float32, device=torch.device("cpu"))
    gen = torch.Generator().manual_seed(0)
    model.bind_kv_cache([torch.randn(2, 8, 16, spec.num_kv_heads, spec.head_dim, generator=gen)
                         for _ in range(spec.num_layers)])

    def req(i: int, n: int) -> Request:
        r = Request(str(i), list(range(3, 3 + n)), SamplingParams(max_tokens=4, temperature=0.0), eos_token_ids=[],
                    max_model_len=max_model_len, sample_seed=i)
        r.block_ids = [i]
        return r

    reqs = [req(0, 5), req(1, 12), req(2, 3)]
    results = {}
    for order in ("lpt", "batch"):
        monkeypatch.setenv("TACHYON_DECODE_ORDER", order)
        runner = DecodeGraphRunner(model, max_batch=8, max_model_len=max_model_len, block_size=16,
                                   vocab_size=spec.vocab_size, device=torch.device("cpu"),
                                   last_tokens=torch.zeros(8, dtype=torch.int64))
        log: list[str] = []
        for b in runner.buckets:
            runner.graphs[b] = _FakeGraph(log, f"full{b}")
            runner.outputs[b] = (torch.zeros(b, 3), torch.zeros(b, dtype=torch.int64))
        runner.run(reqs, [-1, -1, -1])  # stages and uploads bucket 4's inputs
        assert log == ["full4"]
        seen.clear()
        with torch.inference_mode():
            results[order] = runner._step(4)[0].clone()
        want = [1, 0, 2, 3] if order == "lpt" else None  # contexts 12, 5, 3, then the padding row
        assert seen and all(o == want for o in seen), (order, seen)
        if order == "lpt":
            assert runner.decode_order[:4].tolist() == [1, 0, 2, 3]
            assert runner._meta(1).order is None, "a one-row step takes no order"
    torch.testing.assert_close(results["lpt"], results["batch"], rtol=0, atol=0)
    monkeypatch.delenv("TACHYON_DECODE_ORDER")
    runner = DecodeGraphRunner(model, max_batch=8, max_model_len=max_model_len, block_size=16,
                               vocab_size=spec.vocab_size, device=torch.device("cpu"),
                               last_tokens=torch.zeros(8, dtype=torch.int64))
    assert runner.ordered_buckets == set(), "by default a grid of a few programs is not ordered"


def test_default_decode_order_only_for_grids_of_several_waves(monkeypatch):
    """Unset TACHYON_DECODE_ORDER orders a decode launch from 3.5 (sequence, KV head) programs per multiprocessor
    (132 on the CPU's stand-in count); lpt orders every bucket of two or more, batch none."""
    cpu = torch.device("cpu")
    monkeypatch.delenv("TACHYON_DECODE_ORDER", raising=False)
    # Qwen2.5-7B's 4 KV heads: 462 programs is the line (128 sequences, 512 programs, above it; 112 below)
    assert [b for b in (2, 16, 32, 96, 112, 128, 160, 256) if decode_graph_order(b, 4, cpu)] == [128, 160, 256]
    assert [b for b in (32, 48, 56, 64, 96) if decode_graph_order(b, 8, cpu)] == [64, 96]  # 0.6B's 8
    monkeypatch.setenv("TACHYON_DECODE_ORDER", "lpt")
    assert [b for b in (1, 2, 96) if decode_graph_order(b, 4, cpu)] == [2, 96]
    monkeypatch.setenv("TACHYON_DECODE_ORDER", "batch")
    assert not any(decode_graph_order(b, 4, cpu) for b in (2, 128, 256))
    monkeypatch.setenv("TACHYON_DECODE_ORDER", "longest")
    with pytest.raises(ValueError, match="TACHYON_DECODE_ORDER"):
        decode_graph_order(128, 4, cpu)
