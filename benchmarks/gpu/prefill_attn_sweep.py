"""Prefill attention launch configurations by prompt length: the Triton prefill kernel's time per call for one
sequence of T new tokens (no cached prefix) under each (BLOCK_M, BLOCK_N, num_warps, num_stages) candidate, the
single config used before the length table (128:32:4:3) and the table's choice (attention_config.prefill_config), for
the query/KV head layouts of Qwen3-0.6B (16/8) and Qwen2.5-7B (28/4), head dim 128, bf16, 16-token pages. Calls
are timed inside a CUDA graph (10 back-to-back calls per replay), as the engine's prefill graphs run them. Also
one batch of 8 sequences of 32 tokens (seed8-shaped).

Usage (GPU machine, repo root): python3 benchmarks/gpu/prefill_attn_sweep.py --out $OUT
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from benchmarks.gpu.profile_step import graph_replay_ms  # noqa: E402
from tachyon.kernels._triton import next_pow2  # noqa: E402

attn = importlib.import_module("tachyon.kernels.attention")  # the module (tachyon.kernels.attention is a function)
attn_cfg = importlib.import_module("tachyon.kernels.attention_config")

HEADS = {"qwen3-0.6b": (16, 8), "qwen2.5-7b": (28, 4)}
D, PAGE = 128, 16


def case(hq: int, hkv: int, lens: list[int], dev: torch.device):
    """One prefill call of the engine's kernel: sequences of `lens` new tokens each, pages in shuffled order
    (prefill_attn_variants.case builds the inputs; imported here, as that module imports time_call from this one)."""
    from benchmarks.gpu.prefill_attn_variants import case as inputs
    from benchmarks.gpu.prefill_attn_variants import engine_fn

    c = inputs(hq, hkv, lens, dev)
    return engine_fn(c, torch.empty_like(c["q"]))


def time_call(fn, calls: int = 10, replays: int = 20) -> float:
    """us per call: `calls` calls captured in one graph, replayed (profile_step.graph_replay_ms)."""
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    return 1e3 * graph_replay_ms(g, replays) / calls


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="out")
    ap.add_argument("--lens", default="16,32,64,128,256,512,1024,2048,4096")
    args = ap.parse_args()
    dev = torch.device("cuda")
    shipped = dict(BLOCK_M=128, BLOCK_N=32, num_warps=4, num_stages=3)  # the single config before the table
    cands = [dict(BLOCK_M=m, BLOCK_N=n, num_warps=w, num_stages=s)
             for m, n, w, s in itertools.product((16, 32, 64, 128), (32, 64), (4,), (2, 3))]
    cands += [dict(BLOCK_M=m, BLOCK_N=n, num_warps=2, num_stages=2) for m in (16, 32) for n in (32, 64)]
    if shipped not in cands:
        cands.append(shipped)
    workloads = [(str(t), [t]) for t in map(int, args.lens.split(","))] + [("8x32", [32] * 8)]
    res: dict = {"old": shipped, "us": {}}
    for shape, (hq, hkv) in HEADS.items():
        for name, lens in workloads:
            fn = case(hq, hkv, lens, dev)
            row = {}
            for c in cands:
                key = "{BLOCK_M}:{BLOCK_N}:{num_warps}:{num_stages}".format(**c)
                os.environ["TACHYON_PREFILL_TILE"] = key
                try:
                    row[key] = round(time_call(fn), 2)
                except Exception as e:  # a config that cannot compile (shared memory) is reported, not fatal
                    row[key] = f"failed: {type(e).__name__}"
            os.environ.pop("TACHYON_PREFILL_TILE")
            table = attn_cfg.prefill_config("bf16", max(lens), next_pow2(hq // hkv))  # the kernel's BLOCK_G
            row["table"] = row["{BLOCK_M}:{BLOCK_N}:{num_warps}:{num_stages}".format(**table)]
            res["us"][f"{shape} T={name}"] = row
            ok = {k: v for k, v in row.items() if isinstance(v, float) and k != "table"}
            best = min(ok, key=ok.get)
            old = "{BLOCK_M}:{BLOCK_N}:{num_warps}:{num_stages}".format(**shipped)
            print(f"{shape} T={name}: old {old} {row[old]} us, table {row['table']} us, best {best} {ok[best]} us; "
                  + " ".join(f"{k}={v}" for k, v in sorted(ok.items(), key=lambda kv: kv[1])[:4]), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "prefill_attn_sweep.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
