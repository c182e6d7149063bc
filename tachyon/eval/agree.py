"""Agreement between two engine configurations on the same prompts (quality gate for approximations).

Both run greedy with top-20 logprobs. Per prompt: the first position where the tokens differ (None if
they never do), the fraction of tokens before it, and the mean KL(A || B) of the next-token
distributions over positions 0..divergence (where both saw the same context). KL uses A's top-k
plus a "rest" bucket; a token missing from B's top-k gets B's smallest listed probability (an
upper bound), so the estimate is conservative.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TOP_K = 20


def parse_config(text: str) -> dict[str, Any]:
    """Engine args from a JSON object, a JSON/YAML file, or `key=value,key=value` (values JSON-parsed)."""
    p = Path(text)
    if p.exists():
        raw = p.read_text()
        if p.suffix in (".yaml", ".yml"):
            import yaml

            return dict(yaml.safe_load(raw) or {})
        return dict(json.loads(raw))
    if text.strip().startswith("{"):
        return dict(json.loads(text))
    out: dict[str, Any] = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        k, _, v = item.partition("=")
        try:
            out[k.strip()] = json.loads(v)
        except json.JSONDecodeError:
            out[k.strip()] = v
    return out


def kl_topk(a: dict[int, float], b: dict[int, float]) -> float:
    """KL(A || B) from two top-k logprob dicts (token id -> logprob)."""
    if not a or not b:
        return float("nan")
    floor = min(b.values())
    pa = {t: math.exp(lp) for t, lp in a.items()}
    pb = {t: math.exp(b.get(t, floor)) for t in a}
    kl = sum(pa[t] * (math.log(pa[t]) - math.log(pb[t])) for t in a if pa[t] > 0)
    ra, rb = max(1 - sum(pa.values()), 1e-12), max(1 - sum(pb.values()), 1e-12)
    return max(0.0, kl + ra * (math.log(ra) - math.log(rb)))


@dataclass
class PromptAgreement:
    tokens: int
    divergence: int | None
    agreed_fraction: float
    mean_kl: float


@dataclass
class AgreeResult:
    prompts: list[PromptAgreement] = field(default_factory=list)

    @property
    def exact_match(self) -> float:
        return sum(p.divergence is None for p in self.prompts) / len(self.prompts)

    @property
    def token_agreement(self) -> float:
        return sum(p.agreed_fraction for p in self.prompts) / len(self.prompts)

    @property
    def mean_kl(self) -> float:
        ks = [p.mean_kl for p in self.prompts if not math.isnan(p.mean_kl)]
        return sum(ks) / len(ks) if ks else float("nan")

    @property
    def first_divergence(self) -> int | None:
        ds = [p.divergence for p in self.prompts if p.divergence is not None]
        return min(ds) if ds else None

    def as_dict(self) -> dict[str, Any]:
        return {"exact_match": self.exact_match, "token_agreement": self.token_agreement,
                "mean_kl": self.mean_kl, "first_divergence": self.first_divergence,
                "per_prompt": [vars(p) for p in self.prompts]}


def _lp(d) -> dict[int, float]:
    return {int(t): float(getattr(v, "logprob", v)) for t, v in d.items()}


def compare_outputs(a_tokens: list[int], b_tokens: list[int], a_lps: list, b_lps: list) -> PromptAgreement:
    n = min(len(a_tokens), len(b_tokens))
    div = next((i for i in range(n) if a_tokens[i] != b_tokens[i]), None)
    if div is None and len(a_tokens) != len(b_tokens):
        div = n
    upto = n if div is None else min(div + 1, n)
    kls = [kl_topk(_lp(a_lps[i]), _lp(b_lps[i])) for i in range(upto) if a_lps and b_lps]
    kls = [k for k in kls if not math.isnan(k)]
    agreed = (n if div is None else div) / max(len(a_tokens), 1)
    return PromptAgreement(len(a_tokens), div, agreed, sum(kls) / len(kls) if kls else float("nan"))


def generate_greedy(engine_args: dict[str, Any], prompts: list,
                    max_tokens: int) -> list[tuple[list[int], list]]:
    """Load one configuration, run greedy generation with top-k logprobs, free it."""
    import gc

    from tachyon import LLM, SamplingParams

    llm = LLM(**engine_args)
    try:
        sp = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True, logprobs=TOP_K)
        outs = llm.generate(prompts, sp, use_tqdm=False)
        return [(list(o.outputs[0].token_ids), list(o.outputs[0].logprobs or [])) for o in outs]
    finally:
        del llm
        gc.collect()


def agree(a_args: dict[str, Any], b_args: dict[str, Any], prompts: list, max_tokens: int = 64) -> AgreeResult:
    a = generate_greedy(a_args, prompts, max_tokens)
    b = generate_greedy(b_args, prompts, max_tokens)
    return AgreeResult([compare_outputs(ta, tb, la, lb) for (ta, la), (tb, lb) in zip(a, b, strict=True)])
