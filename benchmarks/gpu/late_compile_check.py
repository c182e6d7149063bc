"""Does any common request kind make Triton compile after start-up? One engine (dummy weights), then request kinds
one after another through the offline LLM: greedy and sampled draws at batch sizes 1-5 on long prompts (eager
prefill draws) and short ones (prefill graphs), a prompt longer than a step (chunked), penalties, logprobs, n = 2,
min_tokens and a mixed batch; after each, the compiles the engine's LateCompileWatch saw (kernels/late_compiles.py)
and the kind's wall time. Each late compile stalls a live step by 0.2-2.4 s on an H100 (stop 66). Writes
late_compiles_<shape>.json under --out; exits 1 if any kind compiled.

Usage (GPU machine, repo root): python3 benchmarks/gpu/late_compile_check.py --shape qwen2.5-7b --out DIR
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.gpu.arrivals_probe import _arg  # noqa: E402
from benchmarks.gpu.engine_smoke import load_workload  # noqa: E402
from tachyon import LLM, SamplingParams  # noqa: E402
from tachyon.bench.env import source_digest  # noqa: E402


def _kinds(prompts: list[list[int]], chunk_len: int) -> list[tuple[str, list[list[int]], SamplingParams]]:
    """(name, prompts, params) of each request kind; long prompts are >= 900 tokens, short ones < 200; the chunked
    one chunk_len."""
    long = [p for p in prompts if len(p) >= 900][:5]
    short = [p for p in prompts if len(p) < 200][:5]
    chunked = [(long[0] * 4)[:chunk_len]]
    sampled = SamplingParams(max_tokens=6, temperature=0.8, top_p=0.9, ignore_eos=True)
    kinds = [("greedy long b1", long[:1], SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True))]
    kinds += [(f"sampled long b{b}", long[:b], sampled) for b in range(1, 6)]
    kinds += [(f"sampled short b{b}", short[:b], sampled) for b in range(1, 6)]
    kinds += [
        ("unfiltered sampled long b3", long[:3], SamplingParams(max_tokens=6, temperature=1.0, ignore_eos=True)),
        ("top_k min_p long b2", long[:2], SamplingParams(max_tokens=6, temperature=0.7, top_k=20, min_p=0.05,
                                                        ignore_eos=True)),
        (f"chunked {chunk_len} sampled", chunked, sampled),
        ("penalties b3", long[:3], SamplingParams(max_tokens=6, temperature=0.8, repetition_penalty=1.1,
                                                  presence_penalty=0.5, frequency_penalty=0.2, ignore_eos=True)),
        ("logprobs b2", short[:2], SamplingParams(max_tokens=6, temperature=0.8, logprobs=5, ignore_eos=True)),
        ("n=2 sampled", long[:1], SamplingParams(max_tokens=6, temperature=0.8, n=2, ignore_eos=True)),
        ("min_tokens b2", short[:2], SamplingParams(max_tokens=6, min_tokens=6, temperature=0.8)),
        ("mixed 16", (long + short) * 2 + long[:2] + short[:4], sampled),
    ]
    return kinds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", default="qwen2.5-7b")
    ap.add_argument("--engine-arg", action="append", default=[], type=_arg)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    engine_args = dict(max_model_len=4096) | dict(args.engine_arg)
    llm = LLM(args.shape, load_format="dummy", **engine_args)
    watch = llm.engine.late_compiles
    prompts = [r["prompt_token_ids"] for r in load_workload("nano256")]
    rows = []
    chunk_len = min(3000, llm.engine.max_model_len - 8)  # past a 2,048-token step at the default budget
    for name, batch, params in _kinds(prompts, chunk_len):
        before, kept = watch.count, len(watch.events)
        t0 = time.perf_counter()
        llm.generate(batch, params, use_tqdm=False)
        wall = time.perf_counter() - t0
        events = [dict(kernel=e.kernel.rsplit(".", 1)[-1], ms=round(1e3 * (e.seconds or 0), 1))
                  for e in watch.events[kept:]]
        rows.append(dict(kind=name, requests=len(batch), late_compiles=watch.count - before,
                         wall_ms=round(1e3 * wall, 1), events=events))
        print(f"{name:28s} late {watch.count - before:2d}  {1e3 * wall:8.1f} ms  {events}", flush=True)
    result = dict(shape=args.shape, git_sha=os.environ.get("TACHYON_GIT_SHA"), source_digest=source_digest(),
                  engine_args=engine_args,
                  armed=watch.armed, total_late=watch.count, kinds=rows)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"late_compiles_{Path(args.shape).name}.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(dict(shape=args.shape, armed=watch.armed, total_late=watch.count)))
    sys.exit(1 if watch.count else 0)


if __name__ == "__main__":
    main()
