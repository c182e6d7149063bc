"""Time to first token of one long prompt: where prefill attention's share grows with the prompt (its FLOPs go as
L^2, the GEMMs' as L). One engine (dummy weights, max_model_len = the longest prompt + 8, the default step
budget, so a long prompt is chunked as the engine chunks it); per prompt length, a warm-up generation and then
`--rounds` timed ones (random token ids, max_tokens=1, greedy). Reports the median TTFT (the request's
metrics) and wall time per length; with `--profile`, the GPU time per kernel name of one generation at the
longest length (torch.profiler).

Usage (GPU machine, repo root): python3 benchmarks/gpu/long_prefill.py --shape qwen2.5-7b --lens 4096,16384,32000 \
    --out $OUT/long_prefill
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from benchmarks.gpu.profile_step import device_events  # noqa: E402
from tachyon import LLM, SamplingParams  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="qwen2.5-7b")
    ap.add_argument("--lens", default="4096,16384,32000")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default="out")
    ap.add_argument("--label", default="")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    lens = [int(x) for x in args.lens.split(",")]
    llm = LLM(args.shape, load_format="dummy", dtype="bfloat16", max_model_len=max(lens) + 8, max_num_seqs=8)
    sp = SamplingParams(temperature=0, max_tokens=1, ignore_eos=True)
    g = torch.Generator().manual_seed(0)
    res: dict = {"shape": args.shape, "label": args.label, "git": os.environ.get("TACHYON_GIT_SHA", "unknown"),
                 "gpu": torch.cuda.get_device_name(), "runs": {}}
    for n in lens:
        prompt = torch.randint(100, 20000, (n,), generator=g).tolist()
        llm.generate([prompt], sp, use_tqdm=False)  # warm-up (excluded)
        ttft, wall = [], []
        for _ in range(args.rounds):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            out = llm.generate([prompt], sp, use_tqdm=False)[0]
            wall.append(time.perf_counter() - t0)
            ttft.append(out.metrics.first_token_time - out.metrics.arrival_time)
        res["runs"][n] = dict(ttft_ms=[round(1e3 * t, 2) for t in ttft], wall_ms=[round(1e3 * t, 2) for t in wall],
                              ttft_median_ms=round(1e3 * statistics.median(ttft), 2))
        print(f"{args.label} {args.shape} L={n}: TTFT median {res['runs'][n]['ttft_median_ms']} ms "
              f"(runs {res['runs'][n]['ttft_ms']})", flush=True)
    if args.profile:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            llm.generate([prompt], sp, use_tqdm=False)
            torch.cuda.synchronize()
        per: dict[str, float] = defaultdict(float)
        for name, start, end in device_events(prof):
            per[name[:70]] += end - start
        res["kernels_ms"] = {k: round(v / 1e3, 3) for k, v in sorted(per.items(), key=lambda kv: -kv[1])[:12]}
        print(f"{args.label} L={lens[-1]} kernels (ms): {res['kernels_ms']}", flush=True)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"long_prefill_{args.shape}{'_' + args.label if args.label else ''}.json").write_text(
        json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
