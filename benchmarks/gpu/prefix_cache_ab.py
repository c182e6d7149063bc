"""Prefix caching, on against off, on a dummy-weight shape: N requests that share a long head (a system prompt)
with a short tail of their own, in rounds (a first round fills the cache; later rounds are the chat-like case), and
a control with no shared head (the hashing's cost where nothing hits). Per engine and round: wall seconds, output
tok/s, mean TTFT and TPOT, and the tokens served from the cache. Greedy tokens of the two engines are compared
(they must be equal wherever the hit path and the recompute path run the same kernels; reported, not asserted, as
bf16 GEMM results may differ with the batch's shape).

Usage (device, repo root): python3 benchmarks/gpu/prefix_cache_ab.py --out $OUT [--shape ...] [--requests 64]
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from tachyon import LLM, SamplingParams  # noqa: E402


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def workload(n: int, head: int, tail: int, vocab: int, seed: int, head_seed: int = 0) -> list[list[int]]:
    """n prompts: one head (the same for a head_seed) and a tail each (from seed)."""
    rng = random.Random(head_seed)
    shared = [rng.randrange(100, vocab - 100) for _ in range(head)]
    rng = random.Random(1000 + seed)
    return [shared + [rng.randrange(100, vocab - 100) for _ in range(tail)] for _ in range(n)]


def run_round(llm: LLM, prompts: list[list[int]], max_tokens: int) -> dict:
    sp = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True, detokenize=False)
    sync()
    t0 = time.perf_counter()
    outs = llm.generate(prompts, sp, use_tqdm=False)
    sync()
    dt = time.perf_counter() - t0
    n_out = sum(len(o.outputs[0].token_ids) for o in outs)
    ttft = [o.metrics.first_token_time - o.metrics.arrival_time for o in outs]
    tpot = [(o.metrics.finished_time - o.metrics.first_token_time) / max(1, len(o.outputs[0].token_ids) - 1)
            for o in outs]
    return dict(seconds=dt, output_tok_s=n_out / dt, ttft_mean_ms=1e3 * sum(ttft) / len(ttft),
                tpot_mean_ms=1e3 * sum(tpot) / len(tpot), cached_tokens=sum(o.num_cached_tokens for o in outs),
                prompt_tokens=sum(len(p) for p in prompts), tokens=[o.outputs[0].token_ids for o in outs])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="qwen2.5-7b")
    ap.add_argument("--out", required=True)
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--head", type=int, default=1024, help="shared prompt tokens")
    ap.add_argument("--tail", type=int, default=64, help="each request's own prompt tokens")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--overrides", default="{}", help="JSON merged into the shape's config (a CPU check: layers)")
    args = ap.parse_args()
    results = {}
    tokens = {}
    for caching in (False, True):
        llm = LLM(args.shape, load_format="dummy", device=args.device, max_model_len=4096,
                  enable_prefix_caching=caching, hf_config_overrides=json.loads(args.overrides))
        vocab = llm.engine.spec.vocab_size
        llm.generate([[5, 6, 7]], SamplingParams(max_tokens=4, ignore_eos=True, detokenize=False), use_tqdm=False)
        rows = []
        for r in range(args.rounds):  # each round: new tails after the same head
            rows.append(dict(round=r, case="shared_head",
                             **run_round(llm, workload(args.requests, args.head, args.tail, vocab, seed=r),
                                         args.max_tokens)))
        rows.append(dict(round=0, case="no_shared_head",
                         **run_round(llm, workload(args.requests, 0, args.head + args.tail, vocab, seed=99),
                                     args.max_tokens)))
        name = "caching" if caching else "recompute"
        tokens[name] = [row.pop("tokens") for row in rows]
        results[name] = rows
        for row in rows:
            print(f"{name:9s} {row['case']:15s} round {row['round']}: {row['seconds']:6.2f} s "
                  f"{row['output_tok_s']:9.1f} tok/s  TTFT {row['ttft_mean_ms']:8.1f} ms  TPOT "
                  f"{row['tpot_mean_ms']:6.2f} ms  cached {row['cached_tokens']}/{row['prompt_tokens']}")
        del llm
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    same = [a == b for a, b in zip(tokens["recompute"], tokens["caching"])]
    print("greedy tokens equal, per round:", same)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = dict(shape=args.shape, requests=args.requests, head=args.head, tail=args.tail, max_tokens=args.max_tokens,
                overrides=args.overrides,
                device=torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu")
    (out / "prefix_cache_ab.json").write_text(json.dumps(dict(meta=meta, results=results, tokens_equal=same),
                                                         indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
