"""The eager compile probes (engine/eager_probes.py): one shape per launch class, every class of every batch size
covered, and the runner's probe pass driving its own eager step functions with those shapes."""

import torch

from tachyon import LLM, SamplingParams, kernels
from tachyon.engine import eager_probes as probes
from tachyon.kernels.attention_config import prefill_config
from tachyon.models.llama import fused_decode_attention

CPU = torch.device("cpu")  # sm_count: 132, as an H100 / H200


def _split(batch: int, context: int, kv_heads: int) -> bool:
    return kernels.decode_kv_splits(batch, kv_heads, context, CPU) > 1


def test_decode_probes_cover_every_batch_and_context_class():
    kv_heads, max_seqs, max_len = 8, 256, 4096
    shapes = probes.decode_probe_shapes(max_seqs, max_len, kv_heads, CPU, torch.bfloat16)
    assert len(shapes) == len(set(shapes)) and len(shapes) < 40
    assert (1, 16) in shapes and (1, max_len) in shapes  # batch 1, context split and not
    for context in (16, 300, max_len):  # every batch's (rows, split, fused) class has a probe
        for batch in range(1, max_seqs + 1):
            want = (batch == 1, 1 < batch <= 8, batch % 16 == 0, _split(batch, context, kv_heads),
                    fused_decode_attention(batch, kv_heads, context, CPU))
            assert any((b == 1, 1 < b <= 8, b % 16 == 0, _split(b, c, kv_heads),
                        fused_decode_attention(b, kv_heads, c, CPU)) == want for b, c in shapes), (batch, context)
    # 8 KV heads on 132 SMs: batches up to 16 split a long context (fused from 2), from 17 they do not
    assert any(b == 2 and c == max_len for b, c in shapes)
    assert fused_decode_attention(2, kv_heads, max_len, CPU) and not _split(17, max_len, kv_heads)


def test_decode_probes_short_model_len_has_one_context():
    shapes = probes.decode_probe_shapes(4, 200, 2, CPU, torch.bfloat16)
    assert {c for _, c in shapes} == {16}
    assert [b for b, _ in shapes] == [1, 2]  # batch 1, then 2-4 (skinny rows, never split)


def test_kept_probes_fit_the_step_and_split_both_ways():
    shapes = probes.kept_probe_shapes(256, 4096, 64, 8, CPU, torch.bfloat16)
    assert all(b * probes.KEPT_QUERY <= 64 for b, _ in shapes)
    assert {(b, _split(b, c, 8)) for b, c in shapes if b == 1} == {(1, False), (1, True)}


def test_prefill_probes_one_length_per_tile():
    # Qwen3-0.6B heads (16 / 8: group 2): four tiles, the widest from 257 tokens (no wide tile for group 2)
    lengths = probes.prefill_probe_lengths(8192, 16, 8, torch.bfloat16)
    assert lengths == [32, 33, 65, 257]
    tiles = {tuple(sorted(prefill_config("bf16", q, 2).items())) for q in range(2, 8193, 7)}
    assert len(tiles) == len(lengths)
    for heads, kv_heads, group in ((16, 8, 2), (28, 4, 8)):  # every query length's tile is one a probe takes
        picked = {tuple(sorted(prefill_config("bf16", q, group).items()))
                  for q in probes.prefill_probe_lengths(8192, heads, kv_heads, torch.bfloat16)}
        assert all(tuple(sorted(prefill_config("bf16", q, group).items())) in picked for q in range(2, 8193))
    # Qwen2.5-7B heads (28 / 4: group 8): the wide tile from 1,025 tokens
    assert probes.prefill_probe_lengths(8192, 28, 4, torch.bfloat16) == [32, 33, 65, 257, 1025]
    assert probes.prefill_probe_lengths(100, 28, 4, torch.bfloat16) == [32, 33, 65]
    assert probes.prefill_probe_lengths(8192, 28, 4, torch.float32) == [32]  # one fp32 tile


def test_runner_probe_pass_runs_its_eager_steps(tiny_qwen3, monkeypatch):
    llm = LLM(tiny_qwen3, device="cpu", dtype="float32", max_model_len=512, block_size=4, max_num_seqs=8,
              max_num_batched_tokens=64)
    greedy = SamplingParams(max_tokens=4, temperature=0.0, ignore_eos=True)
    before = llm.generate([[5, 6, 7, 8, 9]], greedy)[0].outputs[0].token_ids
    r = llm.engine.runner
    seen = []
    real_decode, real_prefill = r._eager_decode_hidden, r._eager_prefill_hidden

    def decode(sched, src):
        seen.append(("decode", list(sched.num_new_tokens), [s.num_tokens for s in sched.requests]))
        return real_decode(sched, src)

    def prefill(sched):
        seen.append(("prefill", list(sched.num_new_tokens), [s.num_tokens for s in sched.requests]))
        out = real_prefill(sched)
        assert out.shape[0] == len(sched.requests)  # every stand-in sequence samples
        return out

    monkeypatch.setattr(r, "_eager_decode_hidden", decode)
    monkeypatch.setattr(r, "_eager_prefill_hidden", prefill)
    spec = r.spec
    r.model.bind_kv_cache(r._new_caches(1))  # as in warm_up: every probe block is this cache's block 0
    try:
        r._compile_eager_steps(64)
    finally:
        r.model.bind_kv_cache(r.kv_caches)
    decodes = [s for s in seen if s[0] == "decode"]
    prefills = [s for s in seen if s[0] == "prefill"]
    want_decode = probes.decode_probe_shapes(8, 512, spec.num_kv_heads, CPU, torch.float32)
    assert [(len(n), t[0]) for _, n, t in decodes] == want_decode
    assert all(set(n) == {1} for _, n, _ in decodes)
    kept = probes.kept_probe_shapes(8, 512, 64, spec.num_kv_heads, CPU, torch.float32)
    lengths = probes.prefill_probe_lengths(64, spec.num_heads, spec.num_kv_heads, torch.float32)
    assert [(len(n), t[0], n[0]) for _, n, t in prefills] == (
        [(b, c, probes.KEPT_QUERY) for b, c in kept] + [(1, q, q) for q in lengths])
    # the probes wrote only the scratch cache: the engine's tokens are unchanged
    llm.engine.reset_prefix_cache()
    assert llm.generate([[5, 6, 7, 8, 9]], greedy)[0].outputs[0].token_ids == before


def test_eager_steps_compile_in_a_second_pass(tiny_llama, monkeypatch):
    """The eager step classes compile in a pass after the first (whose modules allocate_kv loads before capture),
    at the profile step's token count; the engine keeps both passes."""
    from contextlib import contextmanager

    import tachyon.kernels.precompile as precompile

    llm = LLM(tiny_llama, device="cpu", dtype="float32", max_model_len=256, block_size=4, max_num_seqs=4,
              max_num_batched_tokens=96)
    r = llm.engine.runner
    events = []

    class FakePass:
        def __init__(self, n):
            self.n = n

        def __bool__(self):
            return True

    @contextmanager
    def fake_compile_only(device):
        events.append(("enter", len(events)))
        yield FakePass(len(events))
        events.append(("exit", len(events)))

    monkeypatch.setattr(precompile, "compile_only", fake_compile_only)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(r, "_compile_eager_steps", lambda t: events.append(("eager", t)))
    r.model.bind_kv_cache(r._new_caches(1))
    try:
        r._compile_kernels(*r._profile_step(96))
    finally:
        r.model.bind_kv_cache(r.kv_caches)
    assert [e[0] for e in events] == ["enter", "exit", "enter", "eager", "exit"]
    assert ("eager", 96) in events
    assert r.compile_pass is not r.eager_compile_pass and r.eager_compile_pass.n == 3


def test_a_failing_eager_pass_does_not_stop_start_up(tiny_llama, monkeypatch, caplog):
    """The second pass is best effort: an error in it is logged and the first pass's result stands."""
    from contextlib import contextmanager

    import tachyon.kernels.precompile as precompile

    llm = LLM(tiny_llama, device="cpu", dtype="float32", max_model_len=256, block_size=4, max_num_seqs=4,
              max_num_batched_tokens=96)
    r = llm.engine.runner

    @contextmanager
    def fake_compile_only(device):
        yield True

    def broken(t):
        raise RuntimeError("probe broke")

    monkeypatch.setattr(precompile, "compile_only", fake_compile_only)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(r, "_compile_eager_steps", broken)
    r.model.bind_kv_cache(r._new_caches(1))
    try:
        with caplog.at_level("WARNING", logger="tachyon.engine"):
            r._compile_kernels(*r._profile_step(96))
    finally:
        r.model.bind_kv_cache(r.kv_caches)
    assert "eager step classes' compile pass failed" in caplog.text and "probe broke" in caplog.text
    assert r.compile_pass is True and r.eager_compile_pass is True
