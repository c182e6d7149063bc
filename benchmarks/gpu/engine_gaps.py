"""Where a batch-1 engine run leaves the GPU idle: one greedy bs1 generation (128-token prompt, 256 new tokens)
timed per engine step (wall time and the part spent waiting for the GPU: host-bound if the wait is ~0), then
the same run under torch.profiler, and every idle gap of the GPU between two consecutive device operations
(kernels, copies, memsets) summed per (previous op, next op) pair. With CUDA graphs and PDL inside a step the
gaps are the step boundaries: token copy to the host, input upload, graph launch.

With --variants (step_ab.py's syntax) the engine's decode graphs are re-captured under each variant and the run is
timed again, so an engine-level A/B needs one engine.

Usage (GPU machine, repo root): python3 benchmarks/gpu/engine_gaps.py --shape qwen3-0.6b --out $OUT [--variants ...]
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

from benchmarks.gpu.profile_step import device_events, timed_generate  # noqa: E402
from tachyon import LLM, SamplingParams  # noqa: E402


def gaps(events: list[tuple[str, float, float]]) -> tuple[dict, float, float]:
    """(per (prev, next) name pair: count and idle us, total idle us, span us) over events sorted by start."""
    pairs: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    idle, prev_end, prev_name = 0.0, None, None
    for name, start, end in events:
        if prev_end is not None and start > prev_end:
            key = f"{prev_name[:40]} -> {name[:40]}"
            pairs[key][0] += 1
            pairs[key][1] += start - prev_end
            idle += start - prev_end
        if prev_end is None or end >= prev_end:
            prev_end, prev_name = end, name
    span = events[-1][2] - events[0][1] if events else 0.0
    return dict(sorted(pairs.items(), key=lambda kv: -kv[1][1])), idle, span


def recapture(llm: LLM, name: str, saved: dict) -> None:
    """Apply step_ab variant `name` (knobs, fusion and config overrides) and re-capture the engine's decode graphs."""
    from benchmarks.gpu.step_ab import BASE, KNOBS, set_configs, set_fusion, variant

    env, fusion, overrides = variant(name)
    for knob in KNOBS.values():
        os.environ.pop(knob, None)
    os.environ.update(BASE | env)
    runner = llm.engine.runner
    set_fusion(runner.model, fusion, saved)
    set_configs(runner.model, overrides, saved)
    with torch.inference_mode():
        runner.graphs.release()
        runner.graphs = runner._graph_runner()
        runner.graphs.capture()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="out")
    ap.add_argument("--shape", default="qwen3-0.6b")
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--prompt-len", type=int, default=128, help="prompt tokens (a long one measures long contexts)")
    ap.add_argument("--max-model-len", type=int, default=4096, help="0: the model's own (as `tachyon bench offline`)")
    ap.add_argument("--variants", default="", help="step_ab.py variants, each re-capturing the decode graphs and "
                                                 "timing the run again (the first run is the warm-up's choices); "
                                                 "a name may repeat, e.g. auto,X,auto,X")
    ap.add_argument("--no-profile", action="store_true")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    llm = LLM(args.shape, load_format="dummy", max_model_len=args.max_model_len or None, max_num_batched_tokens=8192,
              max_num_seqs=8)
    prompt = [7] * args.prompt_len
    sp = SamplingParams(temperature=0, max_tokens=args.tokens, ignore_eos=True)
    res: dict = {"shape": args.shape, "tokens": args.tokens, "prompt_len": args.prompt_len, "variants": {}}
    saved: dict = {}
    for name in ["engine"] + [v for v in args.variants.split(",") if v]:
        if name != "engine":
            recapture(llm, name, saved)
        llm.generate([prompt], sp, use_tqdm=False)
        t0 = time.perf_counter()
        o = llm.generate([prompt], sp, use_tqdm=False)[0]
        wall = time.perf_counter() - t0
        r = {"tok_s": args.tokens / wall,
             "tpot_ms": 1e3 * (o.metrics.finished_time - o.metrics.first_token_time) / (args.tokens - 1),
             "host": timed_generate(llm, [prompt], sp)}
        res["variants"].setdefault(name, []).append(r)  # a variant named twice (alternating rounds) runs twice
        print(f"{args.shape} {name}: {r['tok_s']:.1f} tok/s, TPOT {r['tpot_ms']:.4f} ms; host {r['host']}", flush=True)
    if not args.no_profile:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            llm.generate([prompt], sp, use_tqdm=False)
            torch.cuda.synchronize()
        pairs, idle, span = gaps(device_events(prof))
        res.update(profiled_span_us=span, idle_us=idle, idle_us_per_token=idle / args.tokens,
                   gap_pairs={k: [int(c), round(us, 1)] for k, (c, us) in list(pairs.items())[:25]})
        print(f"profiled: span {span / 1e3:.2f} ms, GPU idle {idle / 1e3:.3f} ms ({idle / args.tokens:.1f} us/token)")
        for k, (c, us) in list(pairs.items())[:12]:
            print(f"  {int(c):5d} x {us / max(c, 1):7.2f} us  {k}")
    (out / f"engine_gaps_{args.shape}.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
