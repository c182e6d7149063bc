"""Write a long-context decode workload (the `bench offline --workload PATH` JSON): N requests of P random prompt
tokens (ids uniform in [100, 10000), seed 0) and O outputs each. The default, long64 (64 x 3,072 + 1,024), keeps
Qwen2.5-7B's decode steps at 64 sequences over 3-4K keys (bench_scripts/s48c.sh, s48d.sh, s48e.sh).

Usage: python3 benchmarks/gpu/long_decode_workload.py OUT.json [--requests 64 --prompt 3072 --outputs 1024]
"""

from __future__ import annotations

import argparse
import json
import random


def long_decode_workload(requests: int, prompt: int, outputs: int, seed: int = 0) -> dict:
    rng = random.Random(seed)
    reqs = [dict(prompt_token_ids=[rng.randrange(100, 10000) for _ in range(prompt)], max_tokens=outputs)
            for _ in range(requests)]
    return dict(name=f"long{requests}", description=f"{requests} x {prompt:,} prompt tokens, {outputs:,} outputs each",
                requests=reqs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--prompt", type=int, default=3072)
    ap.add_argument("--outputs", type=int, default=1024)
    args = ap.parse_args()
    with open(args.out, "w") as f:
        json.dump(long_decode_workload(args.requests, args.prompt, args.outputs), f)


if __name__ == "__main__":
    main()
