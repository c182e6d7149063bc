"""Plain `transformers` generate with static batches: the common baseline.

Batches of `hf_batch_size` requests in workload order, left-padded; each batch generates the
largest `max_tokens` in it with `min_new_tokens` equal to it (EOS cannot end a row early) and each
request counts the first `max_tokens` of its row. A logits processor stamps every decode step, so
TTFT (from the run start, including waiting for earlier batches) and TPOT are measured.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from tachyon.bench.backends.base import Backend, BackendRun, check_prompt, record
from tachyon.bench.gpu import sync
from tachyon.bench.workloads import Workload

_DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16,
           "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16, "half": torch.float16}


def resolve_device_dtype(device: str, dtype: str) -> tuple[torch.device, torch.dtype]:
    dev = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device)
    if dtype == "auto":
        return dev, torch.bfloat16 if dev.type == "cuda" else torch.float32
    return dev, _DTYPES[dtype]


class _StepClock:
    """LogitsProcessor that records when each step's logits are ready (first step synchronised)."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if not self.times and scores.is_cuda:
            torch.cuda.synchronize()
        self.times.append(time.perf_counter())
        return scores


class HFBackend(Backend):
    name = "hf"

    @property
    def warmup_requests(self) -> int:
        """One whole static batch: generate's first run at a new (batch, length) shape does ~3x the host work per
        token of the next ones (benchmarks/results/session15/)."""
        return max(1, self.opts.hf_batch_size)

    def load(self) -> None:
        from transformers import AutoConfig, AutoModelForCausalLM

        self.device, self.dtype = resolve_device_dtype(self.opts.device, self.opts.dtype)
        path = self.opts.model_path()
        if path is None:
            raise ValueError("the hf backend needs --model (an HF directory or a built-in shape)")
        if self.opts.dummy:
            torch.manual_seed(self.opts.seed)
            cfg = AutoConfig.from_pretrained(path)
            with self.device:
                self.model = AutoModelForCausalLM.from_config(cfg, dtype=self.dtype)
        else:
            self.model = AutoModelForCausalLM.from_pretrained(path, dtype=self.dtype).to(self.device)
        self.model.eval()
        cfg = self.model.config
        eos = cfg.eos_token_id[0] if isinstance(cfg.eos_token_id, list) else cfg.eos_token_id
        self.pad_id = cfg.pad_token_id if cfg.pad_token_id is not None else (eos if eos is not None else 0)

    def _generate(self, batch: list[list[int]], n_new: int, temperature: float, top_p: float,
                  clock: _StepClock) -> torch.Tensor:
        from transformers import LogitsProcessorList

        width = max(len(p) for p in batch)
        ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for i, p in enumerate(batch):
            ids[i, width - len(p):] = torch.tensor(p)
            mask[i, width - len(p):] = 1
        sampling: dict[str, Any] = {"do_sample": False}
        if temperature > 0:
            sampling = {"do_sample": True, "temperature": temperature, "top_p": top_p, "top_k": 0}
        with torch.inference_mode():
            return self.model.generate(
                input_ids=ids.to(self.device), attention_mask=mask.to(self.device),
                max_new_tokens=n_new, min_new_tokens=n_new, pad_token_id=self.pad_id,
                logits_processor=LogitsProcessorList([clock]), **sampling)

    def run(self, workload: Workload) -> BackendRun:
        torch.manual_seed(self.opts.seed)
        reqs, bs = workload.requests, max(1, self.opts.hf_batch_size)
        records = [None] * len(reqs)
        sync()
        t0 = time.perf_counter()
        for start in range(0, len(reqs), bs):
            chunk = reqs[start:start + bs]
            clock = _StepClock()
            n_new = max(r.max_tokens for r in chunk)
            out = self._generate([r.prompt_token_ids for r in chunk], n_new, workload.temperature,
                                 workload.top_p, clock)
            sync()
            t_end = time.perf_counter()
            width = max(len(r.prompt_token_ids) for r in chunk)
            for j, r in enumerate(chunk):
                prompt = out[j, width - len(r.prompt_token_ids):width].tolist()
                check_prompt(start + j, r.prompt_token_ids, prompt)
                n_out = min(int(out.shape[1] - width), r.max_tokens)
                first = clock.times[0] - t0 if clock.times else None
                last_i = n_out - 1
                last = (t_end if last_i >= len(clock.times) - 1 else clock.times[last_i]) - t0
                records[start + j] = record(start + j, len(r.prompt_token_ids), r.max_tokens, n_out,
                                            first, last, t_end - t0)
        return BackendRun(records=records, duration_s=time.perf_counter() - t0)

    def close(self) -> None:
        self.model = None
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def info(self) -> dict[str, Any]:
        return {"batch_size": self.opts.hf_batch_size, "dtype": str(self.dtype).removeprefix("torch."),
                "device": str(self.device)}
