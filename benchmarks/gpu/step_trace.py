"""Where a replayed decode step's time goes, kernel by kernel: one engine, the bs1 (and B=8) decode graph
re-captured per variant (step_ab.py's variant syntax), a few replays under torch.profiler, and for each
kernel name the sum over one step of (its end - the previous kernel's end): in a chain of dependent
kernels that is what each adds to the step, PDL waits included. Also the first layers' raw timeline.

Usage (GPU machine, repo root): python3 benchmarks/gpu/step_trace.py --out $OUT --shape qwen2.5-7b \
    --variants auto,fda=1
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from benchmarks.gpu.profile_step import device_events  # noqa: E402
from benchmarks.gpu.step_ab import BASE, KNOBS, set_configs, set_fusion, variant  # noqa: E402
from tachyon import LLM  # noqa: E402


def trace(graph, replays: int) -> list[tuple[str, float, float]]:
    """(kernel name, start us, end us) of `replays` graph replays, in start order."""
    graph.replay()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(replays):
            graph.replay()
        torch.cuda.synchronize()
    return device_events(prof)


def contributions(ev: list[tuple[str, float, float]], replays: int) -> dict[str, float]:
    """Per kernel name: sum of (end - previous end, clamped at 0) over the trace, per replay (us)."""
    out: dict[str, float] = defaultdict(float)
    prev_end = None
    for name, _, end in ev:
        if prev_end is not None:
            out[name[:60]] += max(0.0, end - prev_end) / replays
        prev_end = end if prev_end is None else max(prev_end, end)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="out")
    ap.add_argument("--shape", default="qwen2.5-7b")
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--context-spread", type=int, default=0,
                    help="row contexts uniform in [context - spread, context + spread] (fixed seed): uneven rows as "
                         "in a real batch, with the same mean")
    ap.add_argument("--variants", default="auto")
    ap.add_argument("--batches", default="1")
    ap.add_argument("--replays", type=int, default=5)
    ap.add_argument("--tail", action="store_true", help="print the first step's last 24 kernels")
    ap.add_argument("--max-model-len", type=int, default=4096)
    ap.add_argument("--quantization", default=None, choices=["fp8"], help="the engine's quantization argument")
    ap.add_argument("--kv-cache-dtype", default="auto", choices=["auto", "fp8"], help="the engine's kv_cache_dtype")
    ap.add_argument("--sampling", default="greedy", help="greedy and/or top_p (temperature 0.7, top-p 0.9), "
                    "comma-separated")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    batches = [int(b) for b in args.batches.split(",")]
    llm = LLM(args.shape, load_format="dummy", max_model_len=args.max_model_len, max_num_batched_tokens=8192,
              max_num_seqs=max([8, *batches]), quantization=args.quantization, kv_cache_dtype=args.kv_cache_dtype)
    runner = llm.engine.runner
    layer0 = {n: (getattr(m, "gemv_config", None), getattr(m, "small_config", None))
              for n, m in llm.engine.model.layers[0].named_modules() if hasattr(m, "small_config")}
    print(f"layer 0 kernel choices (batch-1 GEMV, skinny GEMM): {layer0}", flush=True)
    blocks = -(-(args.context + args.context_spread) // runner.block_size)
    saved: dict = {}
    res = {"shape": args.shape, "context": args.context, "context_spread": args.context_spread, "variants": {},
           "quantization": args.quantization, "kv_cache_dtype": args.kv_cache_dtype,
           "layer0_choices": {k: list(v) for k, v in layer0.items()}}
    for name in args.variants.split(","):
        env, fusion, overrides = variant(name)
        for knob in KNOBS.values():
            os.environ.pop(knob, None)
        os.environ.update(BASE | env)
        set_fusion(runner.model, fusion, saved)
        set_configs(runner.model, overrides, saved)
        with torch.inference_mode():
            g = runner._graph_runner()
            g.capture(batches)
            g.seq_lens.fill_(args.context)
            if args.context_spread:
                gen = torch.Generator().manual_seed(0)
                lens = torch.randint(args.context - args.context_spread, args.context + args.context_spread + 1,
                                     (g.seq_lens.shape[0],), generator=gen)
                g.seq_lens.copy_(lens.to(g.seq_lens.dtype))
            # every row its own KV blocks (a large batch reads as many keys as it would in a real run)
            rows = g.block_tables.shape[0]
            g.block_tables[:, :blocks] = torch.arange(rows * blocks, dtype=torch.int32,
                                                      device=g.device).view(rows, blocks)
            g.slots.fill_(-1)
            for b, mode in [(b, m) for b in batches for m in args.sampling.split(",")]:
                g.temperature.fill_(0.7 if mode == "top_p" else 0.0)
                g.top_p.fill_(0.9 if mode == "top_p" else 1.0)
                ev = trace(g.graphs[b], args.replays)
                per = contributions(ev, args.replays)
                t0 = ev[0][1]
                key = str(b) if mode == "greedy" else f"{b}_{mode}"
                res["variants"].setdefault(name, {})[key] = {
                    "step_us": (ev[-1][2] - t0) / args.replays,
                    "kernels_per_step": len(ev) / args.replays,
                    "contribution_us": per,
                    "first_kernels": [(n[:40], round(s - t0, 2), round(e - t0, 2)) for n, s, e in ev[:40]],
                    # the first replayed step's last kernels: the logits, sampling and output tail
                    "last_kernels": [(n[:40], round(s - t0, 2), round(e - t0, 2))
                                     for n, s, e in ev[max(0, len(ev) // args.replays - 24): len(ev) // args.replays]],
                }
                top = ", ".join(f"{k[:28]} {v:.0f}" for k, v in list(per.items())[:8])
                step = (ev[-1][2] - t0) / args.replays
                print(f"{args.shape} {name} B={b} {mode}: {step:.1f} us/step; {top}", flush=True)
                if args.tail:
                    for n, s, e in res["variants"][name][key]["last_kernels"]:
                        print(f"    {s:9.2f} {e:9.2f}  {n}", flush=True)
            g.release()
        tag = f"_spread{args.context_spread}" if args.context_spread else ""
        (out / f"step_trace_{args.shape}{tag}.json").write_text(json.dumps(res, indent=1))
    os.environ.update(BASE)


if __name__ == "__main__":
    main()
