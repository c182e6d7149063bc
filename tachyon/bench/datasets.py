"""Request sets for `bench serve`: what to send (prompt as token ids or text) and how many tokens back.

Contract: each builder returns `list[ServeRequest]`, deterministic for a given seed.
- `random_requests`: random token ids; lengths fixed, uniform in [L(1-r), L(1+r)] or normal(L, rL),
  clipped to >= 1.
- `prompts_file_requests`: one text prompt per non-empty line.
- `sharegpt_requests`: ShareGPT JSON (`[{"conversations": [{"from": "human", "value": ...},
  {"from": "gpt", ...}]}]`): first human turn as prompt, the reply's length as `max_tokens`
  (tokenizer if given, else ~4 characters per token).
- `shared_prefix_requests`: `num_groups` random prefixes of `prefix_len` tokens, each request one
  prefix + its own random suffix.
- `workload_requests`: a standard workload (token ids, exact lengths).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

from tachyon.bench.workloads import load_workload

LOW_ID = 10  # skip the first ids (special tokens in most vocabularies)


@dataclass
class ServeRequest:
    prompt: list[int] | str
    prompt_len: int | None
    max_tokens: int


def sample_lengths(n: int, mean: int, dist: str, ratio: float, rng: random.Random) -> list[int]:
    if dist == "fixed":
        return [mean] * n
    if dist == "uniform":
        lo, hi = max(1, round(mean * (1 - ratio))), max(1, round(mean * (1 + ratio)))
        return [rng.randint(lo, hi) for _ in range(n)]
    if dist == "normal":
        return [max(1, round(rng.gauss(mean, ratio * mean))) for _ in range(n)]
    raise ValueError(f"length distribution must be fixed, uniform or normal, got {dist!r}")


def _random_ids(n: int, vocab_size: int, rng: random.Random) -> list[int]:
    return [rng.randrange(LOW_ID, vocab_size) for _ in range(n)]


def random_requests(n: int, input_len: int, output_len: int, dist: str = "fixed", ratio: float = 0.0,
                    vocab_size: int = 32000, seed: int = 0) -> list[ServeRequest]:
    rng = random.Random(seed)
    ins = sample_lengths(n, input_len, dist, ratio, rng)
    outs = sample_lengths(n, output_len, dist, ratio, rng)
    return [ServeRequest(_random_ids(i, vocab_size, rng), i, o) for i, o in zip(ins, outs, strict=True)]


def shared_prefix_requests(n: int, num_groups: int, prefix_len: int, input_len: int, output_len: int,
                           vocab_size: int = 32000, seed: int = 0) -> list[ServeRequest]:
    rng = random.Random(seed)
    prefixes = [_random_ids(prefix_len, vocab_size, rng) for _ in range(max(1, num_groups))]
    out = []
    for i in range(n):
        ids = prefixes[i % len(prefixes)] + _random_ids(input_len, vocab_size, rng)
        out.append(ServeRequest(ids, len(ids), output_len))
    return out


def _count(text: str, tokenizer) -> int:
    if tokenizer is not None:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])
    return max(1, len(text) // 4)


def prompts_file_requests(path: str, n: int | None, output_len: int, tokenizer=None) -> list[ServeRequest]:
    lines = [ln.strip() for ln in Path(path).read_text().splitlines() if ln.strip()]
    if not lines:
        raise ValueError(f"{path}: no prompts")
    n = n or len(lines)
    picked = [lines[i % len(lines)] for i in range(n)]
    return [ServeRequest(t, _count(t, tokenizer) if tokenizer else None, output_len) for t in picked]


def sharegpt_requests(path: str, n: int, seed: int = 0, tokenizer=None, max_output_len: int = 2048,
                      min_len: int = 4) -> list[ServeRequest]:
    data = json.loads(Path(path).read_text())
    pairs = []
    for item in data:
        conv = item.get("conversations") or item.get("conversation") or []
        for a, b in zip(conv, conv[1:], strict=False):
            if a.get("from") in ("human", "user") and b.get("from") in ("gpt", "assistant", "chatgpt"):
                pairs.append((a.get("value", ""), b.get("value", "")))
                break
    rng = random.Random(seed)
    rng.shuffle(pairs)
    out = []
    for prompt, reply in pairs:
        p_len, o_len = _count(prompt, tokenizer), _count(reply, tokenizer)
        if p_len < min_len or o_len < min_len:
            continue
        out.append(ServeRequest(prompt, p_len if tokenizer else None, min(o_len, max_output_len)))
        if len(out) == n:
            break
    if not out:
        raise ValueError(f"{path}: no usable ShareGPT conversations")
    return out


def workload_requests(name_or_path: str, n: int | None = None,
                      vocab_size: int | None = None) -> list[ServeRequest]:
    w = load_workload(name_or_path)
    if vocab_size:
        w = w.clamp_vocab(vocab_size)
    reqs = w.requests[:n] if n else w.requests
    return [ServeRequest(list(r.prompt_token_ids), len(r.prompt_token_ids), r.max_tokens) for r in reqs]
