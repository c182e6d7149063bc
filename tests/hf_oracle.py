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


def assert_greedy_parity(model, prompts: list[list[int]], got: list[list[int]], expected: list[list[int]],
                         rel_tol: float = 1e-4, max_ties: int = 1, what: str = "") -> None:
    """Each `got` equals transformers' greedy `expected`, or first diverges on a tie that the oracle shows.

    A divergence at position k is explained only when, in transformers' own logits for prompt + expected[:k],
    the engine's token scores within rel_tol * max|logit| of the argmax: fp32 summation order can flip such a
    near-tie, a wrong kernel cannot stay that close. At most `max_ties` sequences may diverge that way.
    `what` prefixes the failure messages.
    """
    what = f"{what}: " if what else ""
    assert len(prompts) == len(got) == len(expected), (f"{what}{len(prompts)} prompts, {len(got)} outputs, "
                                                       f"{len(expected)} expected")
    ties = []
    for i, (prompt, g, e) in enumerate(zip(prompts, got, expected)):
        if g == e:
            continue
        assert len(g) == len(e), f"{what}prompt {i}: {len(g)} tokens, transformers gave {len(e)}"
        k = next(j for j in range(len(e)) if g[j] != e[j])
        logits = hf_logits(model, prompt + e[:k])[-1]
        gap = (logits[e[k]] - logits[g[k]]).item()
        bound = rel_tol * logits.abs().max().item()
        assert gap <= bound, (f"{what}prompt {i} diverges at token {k}: got {g[k]}, transformers {e[k]}; "
                              f"logit gap {gap:.3g} > tie bound {bound:.3g}")
        ties.append((i, k, gap))
    assert len(ties) <= max_ties, f"{what}{len(ties)} tie-explained divergences (prompt, pos, gap): {ties}"
