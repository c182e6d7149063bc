"""Host-side costs of the engine's per-step bookkeeping, measured on the CPU (no GPU needed).

  penalties     one Sampler call on a batch of penalised rows (64 rows, a 1,024-token vocabulary, so the host's
                share shows), each row's token joining its history after every call as in the engine
  cache_blocks  KVCacheManager.cache_blocks after a decode step of 256 requests (16-token blocks)
  caching_run   a whole offline run of 128 requests on the tiny test model, prefix caching off and on
  caching_schedule  the flat schedule of nano256 (flat_schedule.py: the real Scheduler, no model), prefix caching
                off and on, two rounds: seconds of host work and whether the steps are the same

Usage: python3 benchmarks/host_costs.py [--repo DIR] [--history N] KIND...
`--repo` imports `tachyon` from another checkout (e.g. a worktree of an older commit), for before/after figures.
Prints one JSON line per measurement.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path


def penalties(history: int) -> dict:
    import torch

    from tachyon.engine.request import Request, RequestStatus
    from tachyon.engine.sampler import Sampler
    from tachyon.sampling import SamplingParams

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the host's share, one core (restored for the kinds after)
    vocab, batch = 1024, 64
    rng = random.Random(0)
    reqs = []
    for i in range(batch):
        sp = SamplingParams(temperature=0, repetition_penalty=1.1, frequency_penalty=0.2, presence_penalty=0.1,
                            max_tokens=1 << 20)
        r = Request(f"r{i}", [rng.randrange(vocab) for _ in range(history * 2 // 3)], sp, eos_token_ids=[0],
                    max_model_len=1 << 21, sample_seed=i)
        r.status = RequestStatus.RUNNING
        for _ in range(history // 3):
            r.append_token(rng.randrange(vocab))
        reqs.append(r)
    sampler, logits = Sampler(), torch.randn(batch, vocab)
    for k in range(60):
        if k == 10:
            t0 = time.perf_counter()
        for r, t in zip(reqs, sampler(logits, reqs).token_ids):
            r.append_token(t)
    ms = (time.perf_counter() - t0) / 50 * 1e3
    torch.set_num_threads(threads)
    return dict(kind="penalties", rows=batch, vocab=vocab, history=history, ms_per_call=ms)


def cache_blocks() -> dict:
    from tachyon.engine.kv_cache import BlockPool, KVCacheManager
    from tachyon.engine.request import Request
    from tachyon.sampling import SamplingParams

    kv = KVCacheManager(BlockPool(20000, 16), enable_caching=True)
    rng = random.Random(0)
    reqs = []
    for i in range(256):
        r = Request(f"r{i}", [rng.randrange(1000) for _ in range(500)], SamplingParams(max_tokens=2000),
                    eos_token_ids=[0], max_model_len=4096, sample_seed=i)
        kv.allocate_slots(r, 500)
        r.num_computed_tokens = 500
        reqs.append(r)
    kv.cache_blocks(reqs)

    def steps(n: int, register: bool) -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            for r in reqs:
                r.append_token(rng.randrange(1000))
                kv.allocate_slots(r, 1)
                r.num_computed_tokens += 1
            if register:
                kv.cache_blocks(reqs)
        return time.perf_counter() - t0

    n = 200
    base, with_cache = steps(n, False), steps(n, True)
    return dict(kind="cache_blocks", requests=256, us_per_step=(with_cache - base) / n * 1e6)


def caching_run() -> list[dict]:
    from tachyon import LLM, SamplingParams
    from tests.tiny_models import tiny_model_dir

    path = tiny_model_dir("llama")
    rng = random.Random(0)
    prompts = [[rng.randrange(3, 900) for _ in range(rng.randint(20, 60))] for _ in range(128)]
    sp = SamplingParams(temperature=0, max_tokens=64, ignore_eos=True)
    rows = []
    for rep in range(2):
        for caching in (False, True):
            llm = LLM(path, device="cpu", dtype="float32", max_model_len=256, block_size=16,
                      enable_prefix_caching=caching, max_num_seqs=128)
            llm.generate(prompts[:4], sp, use_tqdm=False)
            t0 = time.perf_counter()
            llm.generate(prompts, sp, use_tqdm=False)
            rows.append(dict(kind="caching_run", round=rep, prefix_caching=caching,
                             seconds=time.perf_counter() - t0))
    return rows


def caching_schedule() -> list[dict]:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import flat_schedule

    workload = Path(__file__).resolve().parents[1] / "tachyon" / "bench" / "workloads" / "nano256.json"
    requests = json.loads(workload.read_text())["requests"]
    rows, plain = [], None
    for rep in range(2):
        for caching in (False, True):
            t0 = time.perf_counter()
            steps = flat_schedule.schedule(requests, enable_caching=caching)
            seconds = time.perf_counter() - t0
            plain = plain or steps
            rows.append(dict(kind="caching_schedule", round=rep, prefix_caching=caching, steps=len(steps),
                             same_steps=steps == plain, seconds=seconds))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("kinds", nargs="+", choices=["penalties", "cache_blocks", "caching_run", "caching_schedule"])
    ap.add_argument("--repo", default=str(Path(__file__).resolve().parents[1]))
    ap.add_argument("--history", type=int, nargs="+", default=[300, 1500], help="penalties: tokens per row")
    args = ap.parse_args()
    sys.path.insert(0, args.repo)
    for kind in args.kinds:
        if kind == "penalties":
            rows = [penalties(h) for h in args.history]
        elif kind == "cache_blocks":
            rows = [cache_blocks()]
        elif kind == "caching_run":
            rows = caching_run()
        else:
            rows = caching_schedule()
        for row in rows:
            print(json.dumps(dict(row, repo=args.repo)), flush=True)


if __name__ == "__main__":
    main()
