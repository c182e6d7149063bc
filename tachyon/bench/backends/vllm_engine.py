"""vLLM's offline `LLM` as a benchmark backend (only where vLLM is importable)."""

from __future__ import annotations

import gc
import time
from typing import Any

from tachyon.bench.backends.base import Backend, BackendRun, check_prompt, record
from tachyon.bench.gpu import sync
from tachyon.bench.workloads import Workload


class VLLMBackend(Backend):
    name = "vllm"

    def load(self) -> None:
        try:
            from vllm import LLM
        except ImportError as e:
            raise RuntimeError("the vllm backend needs vLLM installed (pip install vllm)") from e
        args = dict(self.opts.engine_args)
        if self.opts.dummy:
            args["load_format"] = "dummy"
        self.llm = LLM(model=self.opts.model_path(), dtype=self.opts.dtype, seed=self.opts.seed,
                       skip_tokenizer_init=self.opts.dummy, **args)

    def run(self, workload: Workload) -> BackendRun:
        from vllm import SamplingParams

        reqs = workload.requests
        params = [SamplingParams(max_tokens=r.max_tokens, ignore_eos=True, detokenize=False,
                                 temperature=workload.temperature,
                                 top_p=workload.top_p if workload.temperature > 0 else 1.0,
                                 seed=(self.opts.seed + i) if workload.temperature > 0 else None)
                  for i, r in enumerate(reqs)]
        prompts = [{"prompt_token_ids": list(r.prompt_token_ids)} for r in reqs]
        if hasattr(self.llm, "reset_prefix_cache"):  # as Tachyon's backend: no prompt served from an earlier run
            self.llm.reset_prefix_cache()
        sync()
        t0 = time.perf_counter()
        outs = self.llm.generate(prompts, params, use_tqdm=False)
        sync()
        dur = time.perf_counter() - t0
        records = []
        for i, (r, o) in enumerate(zip(reqs, outs, strict=True)):
            check_prompt(i, r.prompt_token_ids, o.prompt_token_ids)
            records.append(record(i, len(r.prompt_token_ids), r.max_tokens, len(o.outputs[0].token_ids),
                                  None, None, dur))
        return BackendRun(records=records, duration_s=dur)

    def close(self) -> None:
        self.llm = None
        gc.collect()

    def info(self) -> dict[str, Any]:
        import vllm

        return {"vllm_version": vllm.__version__}
