"""`eval agree`: KL from top-k logprobs, first divergence, config parsing, two engine configs."""

import math

import pytest

from tachyon.eval.agree import agree, compare_outputs, kl_topk, parse_config


def engine_available() -> bool:
    try:
        import tachyon.engine.llm  # noqa: F401
    except ImportError:
        return False
    return True


def test_kl_topk():
    a = {1: math.log(0.5), 2: math.log(0.3), 3: math.log(0.1)}
    assert kl_topk(a, a) == pytest.approx(0.0, abs=1e-12)
    b = {1: math.log(0.3), 2: math.log(0.5), 3: math.log(0.1)}
    expect = 0.5 * math.log(0.5 / 0.3) + 0.3 * math.log(0.3 / 0.5)
    assert kl_topk(a, b) == pytest.approx(expect, rel=1e-9)
    assert kl_topk(a, {1: math.log(0.9)}) > 0  # tokens missing from B get B's floor


def test_compare_outputs_divergence():
    lp = [{5: -0.1}] * 4
    p = compare_outputs([1, 2, 3, 4], [1, 2, 9, 9], lp, lp)
    assert p.divergence == 2 and p.agreed_fraction == 0.5 and p.mean_kl == pytest.approx(0.0)
    assert compare_outputs([1, 2], [1, 2], lp[:2], lp[:2]).divergence is None


def test_parse_config(tmp_path):
    assert parse_config('{"dtype": "float32"}') == {"dtype": "float32"}
    assert parse_config("model=/x,max_model_len=256,enforce_eager=true") == {
        "model": "/x", "max_model_len": 256, "enforce_eager": True}
    f = tmp_path / "c.yaml"
    f.write_text("dtype: bfloat16\nseed: 3\n")
    assert parse_config(str(f)) == {"dtype": "bfloat16", "seed": 3}


@pytest.mark.skipif(not engine_available(), reason="tachyon.engine.llm not importable yet")
def test_agree_same_config_and_dummy(tiny_llama):
    base = {"model": tiny_llama, "dtype": "float32", "device": "cpu", "max_model_len": 256, "num_kv_blocks": 32}
    prompts = [[1, 20, 30, 40, 50], [1, 7, 8, 9]]
    same = agree(base, dict(base), prompts, max_tokens=8)
    assert same.exact_match == 1.0 and same.token_agreement == 1.0 and same.first_divergence is None
    assert same.mean_kl == pytest.approx(0.0, abs=1e-6)
    other = agree(base, dict(base, load_format="dummy", seed=123), prompts, max_tokens=8)
    # random init is nearly flat, so top-20 KL is small but clearly above the identical configuration's
    assert other.token_agreement < 1.0 and other.mean_kl > 1e-4 > same.mean_kl
