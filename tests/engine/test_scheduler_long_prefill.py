"""long_prefill_token_threshold (engine/scheduler.py): while requests wait, a prompt computes at most T tokens a
step, so short prompts behind a long one get their first token without waiting for its whole prefill; through LLM,
the same greedy tokens as transformers."""

import pytest

from tachyon import LLM, SamplingParams
from tachyon.config import EngineConfig
from tachyon.engine.kv_cache import BlockPool, KVCacheManager
from tachyon.engine.request import Request
from tests.engine.test_mixed_graph import _prompts
from tests.engine.test_scheduler_lpt import _decode, _req
from tests.hf_oracle import assert_greedy_parity, hf_greedy, hf_model


def _first_steps(threshold: int) -> tuple[dict[str, int], list[int], int]:
    """50 decoding streams, then a 20,000-token prompt and five 20-token ones arriving together, under a 2,048-token
    budget: the step each new request is first scheduled in, the decodes scheduled each step, the long prompt's
    tokens computed at the end."""
    from tachyon.engine.scheduler import Scheduler

    s = Scheduler(KVCacheManager(BlockPool(4096, 16)), max_num_seqs=512, max_num_batched_tokens=2048,
                  long_prefill_token_threshold=threshold)
    for i in range(50):
        s.add(_req(f"d{i}", 10_000, prompt_len=16))
    _decode(s, s.schedule())
    big = Request("big", [3] * 20_000, SamplingParams(max_tokens=4, ignore_eos=True), eos_token_ids=[],
                  max_model_len=32_768, sample_seed=0)
    s.add(big)
    for k in range(5):
        s.add(_req(f"short{k}", 4, prompt_len=20))
    first, decodes = {}, []
    for step in range(40):
        out = s.schedule()
        for r in out.requests:
            if not r.request_id.startswith("d"):
                first.setdefault(r.request_id, step)
        decodes.append(sum(r.request_id.startswith("d") for r in out.requests))
        _decode(s, out)
    return first, decodes, big.num_computed_tokens


def test_long_prompt_leaves_budget_to_short_ones_behind_it():
    off, decodes_off, big_off = _first_steps(0)
    on, decodes_on, big_on = _first_steps(256)
    assert off["big"] == on["big"] == 0
    # off: the long prompt takes the whole budget left by the decodes until its prefill ends (~10 steps)
    assert min(off[f"short{k}"] for k in range(5)) >= 9
    # on: every short prompt is admitted in the long one's first step
    assert all(on[f"short{k}"] == 0 for k in range(5)), on
    assert decodes_off == decodes_on == [50] * 40  # the decodes keep their step either way
    assert big_off >= 20_000 and big_on >= 20_000  # once nothing waits, the long prompt takes the budget again


def test_threshold_is_validated():
    with pytest.raises(ValueError, match="long_prefill_token_threshold must be an integer >= 0"):
        EngineConfig(long_prefill_token_threshold=-1)


def test_capped_chunks_greedy_match_transformers():
    """Prompts of 4-60 tokens under a 24-token budget with T = 5: prompts split into 5-token chunks while others
    wait, and every request's tokens are transformers' greedy ones."""
    from tests.tiny_models import tiny_model_dir

    path = tiny_model_dir("llama")
    prompts = _prompts(6, seed=5, lo=4, hi=60)
    lengths = [4 + i for i in range(6)]
    hf = hf_model(path)
    expected = [hf_greedy(hf, p, m) for p, m in zip(prompts, lengths)]
    llm = LLM(path, device="cpu", dtype="float32", max_num_batched_tokens=24, max_num_seqs=8, block_size=4,
              long_prefill_token_threshold=5)
    steps = []
    sched = llm.engine.scheduler
    schedule = sched.schedule

    def recording():
        out = schedule()
        steps.append(max(out.num_new_tokens, default=0))
        return out

    sched.schedule = recording
    sps = [SamplingParams(temperature=0.0, max_tokens=m, ignore_eos=True) for m in lengths]
    outs = llm.generate(prompts, sps, use_tqdm=False)
    assert_greedy_parity(hf, prompts, [o.outputs[0].token_ids for o in outs], expected)
    assert 5 in steps and max(steps) <= 24


def test_default_is_a_quarter_of_the_budget_online_and_off_offline():
    """EngineConfig's default (the server's and AsyncEngine's) caps at a quarter of the step budget, at least 64;
    a value given wins; the offline LLM takes 0 when none is given and keeps one that is."""
    from tests.tiny_models import tiny_model_dir

    assert EngineConfig().resolved_long_prefill_threshold() == 512
    assert EngineConfig(max_num_batched_tokens=8192).resolved_long_prefill_threshold() == 2048
    assert EngineConfig(max_num_batched_tokens=100).resolved_long_prefill_threshold() == 64
    assert EngineConfig(long_prefill_token_threshold=0).resolved_long_prefill_threshold() == 0
    assert EngineConfig(long_prefill_token_threshold=300).resolved_long_prefill_threshold() == 300
    with pytest.raises(ValueError, match="long_prefill_token_threshold"):
        EngineConfig(long_prefill_token_threshold=True)
    path = tiny_model_dir("llama")
    common = dict(device="cpu", dtype="float32", max_num_batched_tokens=256, max_num_seqs=4, enforce_eager=True)
    assert LLM(path, **common).engine.scheduler.long_prefill_cap == 0
    assert LLM(path, long_prefill_token_threshold=None, **common).engine.scheduler.long_prefill_cap == 0
    assert LLM(path, long_prefill_token_threshold=96, **common).engine.scheduler.long_prefill_cap == 96


def test_serve_flags_leave_the_default_to_the_engine():
    """`tachyon serve` without the flag passes nothing, so the engine's quarter-budget default applies; the flag
    given (0 included) reaches the engine."""
    import argparse

    from tachyon.serving import cli

    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers())
    off = cli._entries(parser.parse_args(["serve", "--long-prefill-token-threshold", "0"]))[0]
    default = cli._entries(parser.parse_args(["serve"]))[0]
    assert EngineConfig.from_kwargs(**_engine_fields(off)).resolved_long_prefill_threshold() == 0
    assert EngineConfig.from_kwargs(**_engine_fields(default)).resolved_long_prefill_threshold() == 512


def _engine_fields(entry) -> dict:
    keys = ("long_prefill_token_threshold", "max_num_batched_tokens")
    return {k: v for k, v in entry.engine_args.items() if k in keys}


def _chunks(lens: list[int], threshold: int, running: int | None = None) -> dict[str, int]:
    """Prompt tokens each request gets in one step under a 2,048-token budget; `running`: a prompt of that many
    tokens already admitted (and one step in) before `lens` arrive."""
    from tachyon.engine.scheduler import Scheduler

    s = Scheduler(KVCacheManager(BlockPool(4096, 16)), max_num_seqs=64, max_num_batched_tokens=2048,
                  long_prefill_token_threshold=threshold)
    if running is not None:
        s.add(_req("run", 4, prompt_len=running))
        _decode(s, s.schedule())
    for k, n in enumerate(lens):
        s.add(_req(f"w{k}", 4, prompt_len=n))
    out = s.schedule()
    return dict(zip((r.request_id for r in out.requests), out.num_new_tokens))


def test_cap_binds_only_while_a_shorter_prompt_waits():
    """A prompt is capped for a shorter one behind it, not for one as long or longer (that would trade one first
    token for another); the queue's minima stay right as admissions take requests out of it."""
    # two long prompts together: the first takes the budget (the second is no shorter)
    assert _chunks([3000, 3000], 512) == {"w0": 2048}
    assert _chunks([3000, 4000], 512) == {"w0": 2048}
    # a shorter one behind: the first is capped, the short one admitted whole, the last takes what is left
    assert _chunks([3000, 100, 3000], 512) == {"w0": 512, "w1": 100, "w2": 1436}
    # a running prompt's rest (4,000 - 2,048 = 1,952 tokens): capped for a 1,000-token prompt, not for a 2,000 one
    assert _chunks([1000], 512, running=4000) == {"run": 512, "w0": 1000}
    assert _chunks([2000], 512, running=4000) == {"run": 1952, "w0": 96}


def test_any_waiter_rule_is_the_knob(monkeypatch):
    """TACHYON_LONG_PREFILL_RULE=any caps while any request waits (stop 60's rule); a bad value names the knob."""
    monkeypatch.setenv("TACHYON_LONG_PREFILL_RULE", "any")
    assert _chunks([3000, 3000], 512) == {"w0": 512, "w1": 1536}
    assert _chunks([2000], 512, running=4000) == {"run": 512, "w0": 1536}
    monkeypatch.setenv("TACHYON_LONG_PREFILL_RULE", "shortest")
    with pytest.raises(ValueError, match="TACHYON_LONG_PREFILL_RULE"):
        _chunks([10], 512)
