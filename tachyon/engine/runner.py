"""ModelRunner: owns the KV-cache tensors, runs the model once per step, samples.

Contract: `execute` gets a non-empty SchedulerOutput whose requests already hold blocks for every
scheduled token; it returns one token (and logprobs if asked) per request whose chunk reached its
last token, and fills prompt logprobs for requests that asked. It never touches the block pool.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from tachyon.engine.batch import build_batch
from tachyon.engine.request import Request
from tachyon.engine.sampler import Sampler, SampleResult
from tachyon.engine.scheduler import SchedulerOutput
from tachyon.models.spec import ModelSpec
from tachyon.sampling import Logprob


@dataclass
class StepResult:
    sampled: list[Request]
    result: SampleResult


def kv_cache_bytes_per_block(spec: ModelSpec, block_size: int, dtype: torch.dtype) -> int:
    elem = torch.tensor([], dtype=dtype).element_size()
    return 2 * spec.num_layers * block_size * spec.num_kv_heads * spec.head_dim * elem


class ModelRunner:
    def __init__(self, model: torch.nn.Module, spec: ModelSpec, *, num_blocks: int, block_size: int,
                 device: torch.device, dtype: torch.dtype):
        self.model = model
        self.spec = spec
        self.block_size = block_size
        self.device = device
        self.dtype = dtype
        self.num_blocks = num_blocks
        shape = (2, num_blocks, block_size, spec.num_kv_heads, spec.head_dim)
        self.kv_caches = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(spec.num_layers)]
        model.bind_kv_cache(self.kv_caches)
        self.sampler = Sampler()

    @torch.inference_mode()
    def execute(self, sched: SchedulerOutput) -> StepResult:
        batch = build_batch(sched, self.block_size, self.device)
        hidden = self.model(batch.input_ids, batch.positions, batch.meta)
        self._prompt_logprobs(sched, hidden, batch.meta.query_start_loc.tolist())
        sampled = [sched.requests[i] for i in batch.sample_indices]
        if not sampled:
            return StepResult([], SampleResult([], []))
        logits = self.model.compute_logits(hidden[batch.logits_rows])
        return StepResult(sampled, self.sampler(logits, sampled))

    def _prompt_logprobs(self, sched: SchedulerOutput, hidden: torch.Tensor, qsl: list[int]) -> None:
        for i, (req, n) in enumerate(zip(sched.requests, sched.num_new_tokens)):
            if not req.wants_prompt_logprobs():
                continue
            start = req.num_computed_tokens
            # logits at position p predict prompt token p + 1; fill only the next missing entries
            first = len(req.prompt_logprobs) - 1
            last = min(start + n, req.num_prompt_tokens - 1)
            if first < start or first >= last:
                continue
            rows = hidden[qsl[i] + first - start: qsl[i] + last - start]
            lp = torch.log_softmax(self.model.compute_logits(rows).float(), dim=-1)
            targets = torch.tensor(req.prompt_token_ids[first + 1: last + 1], device=lp.device)
            tok_lp = lp.gather(1, targets[:, None]).squeeze(1)
            ranks = ((lp > tok_lp[:, None]).sum(-1) + 1).tolist()
            k = req.params.prompt_logprobs
            top = torch.topk(lp, k, dim=-1) if k else None
            for j in range(len(targets)):
                d = {int(targets[j]): Logprob(float(tok_lp[j]), ranks[j])}
                if top is not None:
                    for r, (tid, v) in enumerate(zip(top.indices[j].tolist(), top.values[j].tolist())):
                        d.setdefault(tid, Logprob(v, r + 1))
                req.prompt_logprobs.append(d)
