"""transformers models with FP8 rounding applied where Tachyon applies it, written independently of its kernels:
the oracles of the quantization="fp8" and kv_cache_dtype="fp8" engine tests (fp32, CPU)."""

from __future__ import annotations

import torch

from tachyon import LLM, SamplingParams

PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
FP8 = torch.float8_e4m3fn


def fake_e4m3_rows(x: torch.Tensor) -> torch.Tensor:
    """Per-row e4m3 quantize-dequantize in float64 arithmetic (scale = row |max| / 448): W8A8's rule."""
    xd = x.double()
    amax = xd.abs().amax(dim=-1, keepdim=True).clamp(min=1e-12)
    q = (xd * (448.0 / amax)).clamp(-448, 448).float().to(FP8)
    return (q.double() * (amax / 448.0)).to(x.dtype)


def e4m3(x: torch.Tensor) -> torch.Tensor:
    """Each element to its nearest e4m3 value (scale 1, saturated at +-448), back in x's dtype: the KV cache's rule."""
    return x.double().clamp(-448, 448).float().to(FP8).to(x.dtype)


def _fp8_kv_attention() -> str:
    """Registers (once per process; re-registering replaces it) an SDPA attention whose keys and values, after
    the rotary as the cache holds them, are rounded by `e4m3`; returns its name."""
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    def fp8_kv_sdpa(module, query, key, value, attention_mask, **kw):
        return sdpa_attention_forward(module, query, e4m3(key), e4m3(value), attention_mask, **kw)

    AttentionInterface.register("test_fp8_kv_sdpa", fp8_kv_sdpa)
    return "test_fp8_kv_sdpa"


def hf_fp8_model(path: str, *, w8a8: bool = False, fp8_kv: bool = False):
    """The checkpoint in fp32 with, for `w8a8`, every decoder projection's weight and input fake-quantized per
    row and, for `fp8_kv`, keys and values rounded to e4m3 in attention. Never stops early (like ignore_eos)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32,
                                                 attn_implementation=_fp8_kv_attention() if fp8_kv else "sdpa").eval()
    model.generation_config.eos_token_id = None
    if w8a8:
        n = 0
        for name, mod in model.named_modules():
            if name.rsplit(".", 1)[-1] in PROJECTIONS:
                mod.weight.data = fake_e4m3_rows(mod.weight.data)
                mod.register_forward_pre_hook(lambda _m, args: (fake_e4m3_rows(args[0]),) + tuple(args[1:]))
                n += 1
        assert n == 7 * model.config.num_hidden_layers
    return model


def last_logprob(model, ids: list[int], tok: int) -> float:
    """log p(tok | ids) under `model`."""
    with torch.no_grad():
        return float(torch.log_softmax(model(torch.tensor([ids])).logits[0, -1].float(), -1)[tok])


def greedy(llm: LLM, prompts: list[list[int]], n: int) -> list[list[int]]:
    params = SamplingParams(temperature=0.0, max_tokens=n, ignore_eos=True)
    return [o.outputs[0].token_ids for o in llm.generate(prompts, params, use_tqdm=False)]


def first_token_logprob(llm: LLM, prompt: list[int]) -> tuple[int, float]:
    """The engine's greedy first token after `prompt` and its log-prob."""
    out = llm.generate([prompt], SamplingParams(temperature=0.0, max_tokens=1, logprobs=1),
                       use_tqdm=False)[0].outputs[0]
    tok = out.token_ids[0]
    return tok, out.logprobs[0][tok].logprob
