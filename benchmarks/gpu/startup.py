"""Engine start-up time on this machine (weights, warm-up, KV cache + graph capture), default engine
arguments, dummy weights; run first on a fresh machine for the cold figure (empty Triton cache).

Usage (GPU machine, repo root): python3 benchmarks/gpu/startup.py --shape qwen2.5-7b [--quantization fp8] [--out DIR]
    [--tag T] [--engine-arg KEY=VALUE ...]   (an engine argument other than the default, e.g. mixed_graph_max_tokens=0)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tachyon import LLM  # noqa: E402
from tachyon.bench.commands import parse_kv  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="qwen2.5-7b")
    ap.add_argument("--out", default=None)
    ap.add_argument("--quantization", default=None, choices=["fp8"], help="the engine's quantization argument")
    ap.add_argument("--engine-arg", action="append", default=[], metavar="KEY=VALUE",
                    help="an engine argument (value parsed as JSON, as bench offline's), repeatable")
    ap.add_argument("--tag", default="", help="appended to the output file's name")
    args = ap.parse_args()
    triton_cache = Path(os.environ.get("TRITON_CACHE_DIR", Path.home() / ".triton" / "cache"))
    cached = sum(1 for _ in triton_cache.glob("*")) if triton_cache.exists() else 0
    t0 = time.perf_counter()
    extra = parse_kv(args.engine_arg)
    llm = LLM(args.shape, load_format="dummy", quantization=args.quantization, **extra)
    wall = time.perf_counter() - t0
    import torch
    import triton

    env = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, cuda=torch.version.cuda,
               triton=triton.__version__, git=os.environ.get("GIT_SHA") or os.environ.get("TACHYON_GIT_SHA"))
    res = dict(shape=args.shape, quantization=args.quantization, wall_s=wall, triton_cache_entries_before=cached,
               engine_args=extra, env=env, **llm.engine.startup, detail=llm.engine.startup_detail)
    print(json.dumps(res), flush=True)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        tag = (f"_{args.quantization}" if args.quantization else "") + (f"_{args.tag}" if args.tag else "")
        (Path(args.out) / f"startup_{args.shape}{tag}.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
