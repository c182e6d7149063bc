"""Where a large prefill step's time goes, kernel by kernel: one engine step prefilling `--prompts` prompts of
`--prompt-len` tokens (one step when their total fits max_num_batched_tokens), run a few times under
torch.profiler; GPU time per kernel name per step, the step's wall time, and the GEMMs' share against the
FLOP floor (2 x non-embedding parameters x tokens / 778 TFLOP/s).

Usage (GPU machine, repo root): python3 benchmarks/gpu/prefill_trace.py --shape qwen2.5-7b --out $OUT
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from benchmarks.gpu.profile_step import device_events  # noqa: E402
from tachyon import LLM, SamplingParams  # noqa: E402

PEAK_FLOPS = 778e12


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="out")
    ap.add_argument("--shape", default="qwen2.5-7b")
    ap.add_argument("--prompts", type=int, default=15)
    ap.add_argument("--prompt-len", type=int, default=546)
    ap.add_argument("--max-num-batched-tokens", type=int, default=8192)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    llm = LLM(args.shape, load_format="dummy", max_model_len=4096,
              max_num_batched_tokens=args.max_num_batched_tokens, max_num_seqs=512)
    model = llm.engine.runner.model
    embed = model.embed_tokens.weight.numel()
    params = sum(p.numel() for p in model.parameters()) - embed  # the tied lm_head counts once, as the embedding
    tokens = args.prompts * args.prompt_len
    prompts = [[(7 * r + i) % 1000 + 10 for i in range(args.prompt_len)] for r in range(args.prompts)]
    sp = SamplingParams(max_tokens=1, temperature=0.0, ignore_eos=True)
    llm.generate(prompts, sp, use_tqdm=False)  # warm-up (compiles)
    torch.cuda.synchronize()
    walls = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        llm.generate(prompts, sp, use_tqdm=False)
        torch.cuda.synchronize()
        walls.append(time.perf_counter() - t0)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(args.repeats):
            llm.generate(prompts, sp, use_tqdm=False)
        torch.cuda.synchronize()
    per: dict[str, float] = defaultdict(float)
    for name, start, end in device_events(prof):
        per[name[:70]] += (end - start) / args.repeats
    per = dict(sorted(per.items(), key=lambda kv: -kv[1]))
    gemm = sum(v for k, v in per.items() if "nvjet" in k or "gemm" in k.lower() or "cutlass" in k.lower())
    floor_ms = 2 * params * tokens / PEAK_FLOPS * 1e3
    res = dict(shape=args.shape, prompts=args.prompts, prompt_len=args.prompt_len, tokens=tokens,
               wall_ms=[1e3 * w for w in walls], gpu_ms=sum(per.values()) / 1e3, gemm_ms=gemm / 1e3,
               gemm_floor_ms=floor_ms, kernels_us=per,
               git=os.environ.get("GIT_SHA") or os.environ.get("TACHYON_GIT_SHA"))
    print(f"{args.shape} prefill {tokens} tokens: wall {min(walls) * 1e3:.1f} ms, GPU {res['gpu_ms']:.1f} ms, "
          f"GEMMs {res['gemm_ms']:.1f} ms (floor {floor_ms:.1f})", flush=True)
    for k, v in list(per.items())[:14]:
        print(f"  {v / 1e3:8.2f} ms  {k}", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"prefill_trace_{Path(args.shape).name}.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
