"""Tachyon's offline `LLM` as a benchmark backend: all requests submitted at once (continuous batching).

TTFT/TPOT come from each `RequestOutput.metrics` (engine clock, made relative to the earliest
arrival, which is the start of the run).
"""

from __future__ import annotations

import gc
import time
from typing import Any

from tachyon.bench.backends.base import Backend, BackendRun, check_prompt, record
from tachyon.bench.gpu import sync
from tachyon.bench.workloads import Workload
from tachyon.engine.heap import freeze_heap, unfreeze_heap


def sampling_params(workload: Workload, max_tokens: int, seed: int | None = None):
    from tachyon import SamplingParams

    kw: dict[str, Any] = {"temperature": workload.temperature}
    if workload.temperature > 0:
        kw.update(top_p=workload.top_p, seed=seed)
    return SamplingParams(max_tokens=max_tokens, ignore_eos=True, detokenize=False, **kw)


class TachyonBackend(Backend):
    name = "tachyon"

    def load(self) -> None:
        from tachyon import LLM

        args = dict(self.opts.engine_args)
        args.setdefault("seed", self.opts.seed)
        if self.opts.dummy:
            args["load_format"] = "dummy"
        self.llm = LLM(model=self.opts.model_path(), dtype=self.opts.dtype, device=self.opts.device, **args)
        freeze_heap()  # the timed runs' collections then scan only what they make (engine.heap)

    def run(self, workload: Workload) -> BackendRun:
        reqs = workload.requests
        params = [sampling_params(workload, r.max_tokens, self.opts.seed + i) for i, r in enumerate(reqs)]
        # every run computes every prompt, as the baselines do: nothing the warm-up or an earlier repeat left in
        # the prefix cache serves it (prompts shared within the run still are)
        self.llm.reset_prefix_cache()
        sync()
        t0 = time.perf_counter()
        outs = self.llm.generate([list(r.prompt_token_ids) for r in reqs], params, use_tqdm=False)
        sync()
        dur = time.perf_counter() - t0
        arrivals = [o.metrics.arrival_time for o in outs if o.metrics is not None]
        base = min(arrivals) if arrivals else None
        records = []
        for i, (r, o) in enumerate(zip(reqs, outs, strict=True)):
            check_prompt(i, r.prompt_token_ids, o.prompt_token_ids)
            n_out = len(o.outputs[0].token_ids)
            m = o.metrics
            first = last = None
            end = dur
            if m is not None and base is not None:
                first = None if m.first_token_time is None else m.first_token_time - base
                fin = m.last_token_time or m.finished_time
                last = None if fin is None else fin - base
                end = last if last is not None else dur
            records.append(record(i, len(r.prompt_token_ids), r.max_tokens, n_out, first, last, end))
        return BackendRun(records=records, duration_s=dur)

    def close(self) -> None:
        eng = getattr(self.llm, "engine", None)
        if eng is not None and hasattr(eng, "shutdown"):
            eng.shutdown()
        self.llm = None
        unfreeze_heap()
        gc.collect()
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except Exception:
            pass

    def info(self) -> dict[str, Any]:
        """The engine's arguments, and what its start-up decided: KV blocks, start-up phases (s) and, on a GPU, the
        memory profile that sized the cache (bytes). Two runs of one config can differ in these."""
        eng = getattr(self.llm, "engine", None)
        cfg = getattr(eng, "config", None)
        if cfg is None:
            return {}
        state: dict[str, Any] = {"num_kv_blocks": eng.pool.num_blocks,
                                 "kv_cache_tokens": eng.pool.num_blocks * cfg.block_size,
                                 "startup_s": dict(getattr(eng, "startup", {})),
                                 "startup_detail": dict(getattr(eng, "startup_detail", {}))}
        profile = getattr(eng.runner, "profile", None) or {}
        state.update({k: v for k, v in profile.items() if k != "gemv"})  # gemv: the shipped table's picks
        return {"engine_config": {k: v for k, v in vars(cfg).items() if k != "hf_config_overrides"},
                "engine_state": state}
