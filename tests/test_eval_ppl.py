"""`eval ppl`: sliding windows, Tachyon prompt logprobs vs transformers on the same token ids."""

import argparse

import pytest

from tachyon.eval import cli as eval_cli
from tachyon.eval.ppl import hf_ppl, tachyon_ppl, tokenize, windows
from tachyon.eval.text import default_text


def engine_available() -> bool:
    try:
        import tachyon.engine.llm  # noqa: F401
    except ImportError:
        return False
    return True


needs_engine = pytest.mark.skipif(not engine_available(), reason="tachyon.engine.llm not importable yet")


def test_windows_score_every_token_once():
    for n, w, s in [(10, 4, 2), (10, 4, 4), (5, 8, 4), (100, 16, 5), (2, 2, 1)]:
        scored = [p for _, e, f in windows(n, w, s) for p in range(f, e)]
        assert scored == list(range(1, n)), (n, w, s)
        assert all(e - b <= w for b, e, _ in windows(n, w, s))
    with pytest.raises(ValueError):
        windows(10, 4, 5)


def test_default_text_is_deterministic():
    a = default_text(5000)
    assert a == default_text(5000) and len(a) == 5000 and "textwrap" in a


@needs_engine
def test_tiny_model_matches_transformers(tiny_llama):
    from transformers import AutoModelForCausalLM

    from tachyon import LLM

    llm = LLM(model=tiny_llama, dtype="float32", device="cpu", max_model_len=256, num_kv_blocks=64)
    ids = tokenize(llm.get_tokenizer(), default_text(3000), 200)
    ours = tachyon_ppl(llm, ids, window=64, stride=32)
    ref = hf_ppl(AutoModelForCausalLM.from_pretrained(tiny_llama).eval(), ids, window=64, stride=32)
    assert ours.tokens == ref.tokens == len(ids) - 1
    assert abs(ours.ppl / ref.ppl - 1) < 1e-3


@needs_engine
def test_smollm2_within_half_percent_of_transformers(capsys):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tachyon.models.default import default_model_path
    from tachyon.models.gguf import gguf_to_hf_dir

    hf_dir = gguf_to_hf_dir(default_model_path())
    ids = tokenize(AutoTokenizer.from_pretrained(hf_dir), default_text(4000), 192)
    ref = hf_ppl(AutoModelForCausalLM.from_pretrained(hf_dir).eval(), ids, window=128, stride=64)
    p = argparse.ArgumentParser()
    eval_cli.register(p.add_subparsers(dest="command", required=True))
    args = p.parse_args(["eval", "ppl", "--max-tokens", "192", "--window", "128", "--stride", "64",
                         "--dtype", "float32", "--device", "cpu", "--engine-arg", "max_model_len=512",
                         "--engine-arg", "num_kv_blocks=64", "--json"])
    assert args.func(args) == 0
    import json

    ours = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert ours["tokens"] == ref.tokens
    assert abs(ours["ppl"] / ref.ppl - 1) < 0.005, (ours["ppl"], ref.ppl)
