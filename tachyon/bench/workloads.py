"""Standard offline workloads: token-id prompts with forced output lengths.

Contract: `load_workload(name_or_path)` returns a `Workload` from a built-in name (seed8, bs1,
nano256, shipped in tachyon/bench/workloads/) or a JSON file of the same format
(`{"name", "description", "requests": [{"prompt_token_ids": [...], "max_tokens": N}]}`).
`sampling(workload)` gives the workload's sampling settings (seed8: temperature 0.7, top-p 0.9;
others greedy).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

WORKLOAD_DIR = Path(__file__).with_name("workloads")
SAMPLED = {"seed8": (0.7, 0.9)}


@dataclass
class WorkloadRequest:
    prompt_token_ids: list[int]
    max_tokens: int


@dataclass
class Workload:
    name: str
    description: str = ""
    requests: list[WorkloadRequest] = field(default_factory=list)
    temperature: float = 0.0
    top_p: float = 1.0

    @property
    def input_tokens(self) -> int:
        return sum(len(r.prompt_token_ids) for r in self.requests)

    @property
    def output_tokens(self) -> int:
        return sum(r.max_tokens for r in self.requests)

    def clamp_vocab(self, vocab_size: int) -> Workload:
        """Same lengths with ids folded into [0, vocab_size) (for small test vocabularies)."""
        reqs = [WorkloadRequest([t % vocab_size for t in r.prompt_token_ids], r.max_tokens)
                for r in self.requests]
        return Workload(self.name, self.description, reqs, self.temperature, self.top_p)

    def truncated(self, num_requests: int | None = None, max_tokens: int | None = None) -> Workload:
        reqs = self.requests[:num_requests] if num_requests else list(self.requests)
        if max_tokens:
            reqs = [WorkloadRequest(r.prompt_token_ids, min(r.max_tokens, max_tokens)) for r in reqs]
        return Workload(self.name, self.description, reqs, self.temperature, self.top_p)


def builtin_workloads() -> list[str]:
    return sorted(p.stem for p in WORKLOAD_DIR.glob("*.json"))


def load_workload(name_or_path: str) -> Workload:
    p = Path(name_or_path)
    if not p.exists():
        p = WORKLOAD_DIR / f"{name_or_path}.json"
    if not p.exists():
        raise ValueError(f"unknown workload {name_or_path!r}: built-ins are {builtin_workloads()}")
    data = json.loads(p.read_text())
    reqs = []
    for i, r in enumerate(data["requests"]):
        ids, n = r["prompt_token_ids"], r["max_tokens"]
        if not ids or not all(isinstance(t, int) and t >= 0 for t in ids):
            raise ValueError(f"{p}: request {i}: prompt_token_ids must be non-empty non-negative ints")
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"{p}: request {i}: max_tokens must be an integer >= 1, got {n!r}")
        reqs.append(WorkloadRequest(list(ids), n))
    name = data.get("name") or p.stem
    temp, top_p = SAMPLED.get(name, (float(data.get("temperature", 0.0)), float(data.get("top_p", 1.0))))
    return Workload(name, data.get("description", ""), reqs, temp, top_p)
