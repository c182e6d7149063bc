"""transformers `generate` as the independent oracle for greedy parity (fp32, CPU)."""

from __future__ import annotations

import functools

import torch


@functools.lru_cache(maxsize=4)
def hf_model(path: str, gguf_file: str | None = None):
    from transformers import AutoModelForCausalLM

    kw = {"gguf_file": gguf_file} if gguf_file else {}
    m = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, **kw).eval()
    m.generation_config.eos_token_id = None  # run to max_new_tokens, never stop early (like ignore_eos)
    return m


def hf_greedy(model, prompt_ids: list[int], max_new_tokens: int) -> list[int]:
    ids = torch.tensor([prompt_ids])
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=max_new_tokens, pad_token_id=0)
    return out[0, len(prompt_ids):].tolist()


def hf_logits(model, ids: list[int]) -> torch.Tensor:
    """Logits [len(ids), V] of one forward pass over ids."""
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].float()
