"""The offline LLM's defaults: a per-step token budget larger than the server's, so a batch of prompts prefills in
fewer steps, and on a CUDA device the flat admission order (engine/llm.py)."""

import pytest

from tachyon import LLM, SamplingParams
from tachyon.config import EngineConfig
from tachyon.engine import llm as llm_module
from tachyon.engine.llm import OFFLINE_MAX_NUM_BATCHED_TOKENS, offline_policy


def _computed_after_one_step(llm: LLM, prompt_len: int, n: int) -> list[int]:
    """Queue `n` prompts, run one engine step, return each request's computed tokens; then abort them all."""
    eng = llm.engine
    for i in range(n):
        eng.add_request(str(i), [5 + i] * prompt_len, SamplingParams(max_tokens=4))
    eng.step()
    computed = sorted(r.num_computed_tokens for r in eng.scheduler.running)
    for i in range(n):
        eng.abort(str(i))
    eng.check_integrity()
    return computed


@pytest.mark.parametrize("budget,computed", [
    (None, [1000, 1000, 1000]),  # the offline default: all three prompts in one step
    (2048, [48, 1000, 1000]),  # the server's: two prompts and a 48-token chunk of the third
])
def test_offline_llm_budget(tiny_llama, budget, computed):
    llm = LLM(tiny_llama, device="cpu", dtype="float32", max_model_len=1024, max_num_batched_tokens=budget)
    assert llm.engine.config.max_num_batched_tokens == (budget or OFFLINE_MAX_NUM_BATCHED_TOKENS)
    assert _computed_after_one_step(llm, 1000, 3) == computed


def test_server_default_budget_is_smaller():
    """The server builds EngineConfig directly: its steps stay short so a prefill holds decodes up less."""
    assert EngineConfig().max_num_batched_tokens == 2048 < OFFLINE_MAX_NUM_BATCHED_TOKENS


def test_explicit_budget_is_validated(tiny_llama):
    with pytest.raises(ValueError, match="max_num_batched_tokens"):
        LLM(tiny_llama, device="cpu", dtype="float32", max_num_batched_tokens=0)


def test_cli_budget_reaches_the_llm_only_when_given():
    import argparse

    from tachyon.engine.cli import add_engine_args, engine_kwargs

    p = argparse.ArgumentParser()
    add_engine_args(p)
    assert "max_num_batched_tokens" not in engine_kwargs(p.parse_args([]))  # LLM picks the device's default
    assert engine_kwargs(p.parse_args(["--max-num-batched-tokens", "4096"]))["max_num_batched_tokens"] == 4096


@pytest.mark.parametrize("bad", [None, 0, "8192"])
def test_engine_config_names_a_bad_budget(bad):
    with pytest.raises(ValueError, match="max_num_batched_tokens must be an integer >= 1"):
        EngineConfig(max_num_batched_tokens=bad)


def test_offline_policy_is_flat_on_cuda_only():
    assert offline_policy(EngineConfig(device="cuda")) == "flat"
    assert offline_policy(EngineConfig(device="cpu")) == "fcfs"
    assert EngineConfig().scheduling_policy == "fcfs"  # the server builds EngineConfig directly: arrival order


@pytest.mark.parametrize("given,expect", [(None, "fcfs"), ("lpt", "lpt"), ("flat", "flat")])
def test_llm_policy_default_and_override(tiny_llama, given, expect):
    llm = LLM(tiny_llama, device="cpu", dtype="float32", max_model_len=256, scheduling_policy=given)
    assert llm.engine.scheduler.policy == llm.engine.config.scheduling_policy == expect


def test_llm_names_a_bad_policy(tiny_llama):
    """Only None picks the default: an empty or unknown policy is an error naming the field."""
    for bad in ("", "sjf"):
        with pytest.raises(ValueError, match="scheduling_policy"):
            LLM(tiny_llama, device="cpu", dtype="float32", max_model_len=256, scheduling_policy=bad)


def test_llm_takes_offline_policy_when_none_given(tiny_llama, monkeypatch):
    """The wiring a CUDA device takes, on the CPU: LLM asks offline_policy, and an explicit policy wins over it."""
    monkeypatch.setattr(llm_module, "offline_policy", lambda config: "flat")
    assert LLM(tiny_llama, device="cpu", dtype="float32", max_model_len=256).engine.scheduler.policy == "flat"
    llm = LLM(tiny_llama, device="cpu", dtype="float32", max_model_len=256, scheduling_policy="fcfs")
    assert llm.engine.scheduler.policy == "fcfs"


def test_cli_policy_reaches_the_llm_only_when_given():
    import argparse

    from tachyon.engine.cli import add_engine_args, engine_kwargs

    p = argparse.ArgumentParser()
    add_engine_args(p)
    assert "scheduling_policy" not in engine_kwargs(p.parse_args([]))  # LLM picks the device's default
    assert engine_kwargs(p.parse_args(["--scheduling-policy", "lpt"]))["scheduling_policy"] == "lpt"
