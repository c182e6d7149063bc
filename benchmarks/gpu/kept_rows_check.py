"""GPU check of the last layer run on the sampling rows only (batch.KeptRows): on a dummy model of each shape, one
eager step of three prompts (one cut short by the token budget) through the full forward and through the kept
rows from the same cache contents. Prints the kept rows' relative error against the full forward's (bf16: ≤ 1e-2
passes) and whether every layer's cache came out bit-identical; exits 1 on a failure.

Usage (GPU machine, repo root): python3 benchmarks/gpu/kept_rows_check.py [--shapes qwen3-0.6b,qwen2.5-7b]
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from tachyon import LLM, SamplingParams  # noqa: E402
from tachyon.engine.batch import build_batch  # noqa: E402


def check(shape: str) -> bool:
    llm = LLM(shape, load_format="dummy", max_model_len=4096, max_num_batched_tokens=2048, enforce_eager=True,
              gpu_memory_utilization=0.3)
    eng, r = llm.engine, llm.engine.runner
    rng = random.Random(0)
    for i, n in enumerate((700, 900, 1000)):
        eng.add_request(f"k{i}", [rng.randrange(3, 30000) for _ in range(n)], SamplingParams(max_tokens=2))
    sched = eng.scheduler.schedule()
    full_b = build_batch(sched, r.block_size, r.device)
    kept_b = build_batch(sched, r.block_size, r.device, keep_logits_rows=True)
    with torch.inference_mode():
        before = [c.clone() for c in r.kv_caches]
        full = r.model(full_b.input_ids, full_b.positions, full_b.meta)[full_b.logits_rows].float()
        after_full = [c.clone() for c in r.kv_caches]
        for c, b in zip(r.kv_caches, before):
            c.copy_(b)
        kept = r.model(kept_b.input_ids, kept_b.positions, kept_b.meta, keep=kept_b.keep).float()
    err = ((kept - full).norm() / full.norm()).item()
    same_cache = all(torch.equal(a, b) for a, b in zip(after_full, r.kv_caches))
    ok = err <= 1e-2 and same_cache and not torch.isnan(kept).any().item()
    print(f"{shape}: chunks {sched.num_new_tokens}, kept rows {kept_b.keep.rows.tolist()}, rel err {err:.2e}, "
          f"caches identical {same_cache}: {'ok' if ok else 'FAILED'}", flush=True)
    for i in range(3):
        eng.abort(f"k{i}")
    return ok


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="qwen3-0.6b,qwen2.5-7b")
    args = ap.parse_args()
    results = []
    for shape in args.shapes.split(","):
        results.append(check(shape))
        torch.cuda.empty_cache()
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
