"""The sampler's paths on the GPU, each configuration in its own process (an illegal memory access
kills the CUDA context): (MAX_CHUNKS, CANDIDATES, STREAM_BLOCK, HIST_BINS) exercising the direct,
refine and fallback paths at test-sized and production-sized bins; the tokens must agree across paths.

Usage (GPU machine, repo root): python3 benchmarks/kernels/sample_paths_check.py
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

CONFIGS = ["4 4096 128 32", "1 8 128 32", "2 2 128 32", "4 4096 1024 1024", "1 8 1024 1024", "2 2 1024 1024"]
CASES = [(1.0, 0, 0.9, 0.0), (0.8, 40, 0.9, 0.0), (1.0, 300, 0.95, 0.05), (1.0, 200, 1.0, 0.0)]  # T, k, p, min_p
SCALES = [0.05, 0.5, 1.0, 0.3]


def run_one(max_chunks: int, cap: int, stream_block: int, bins: int) -> list[int]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    import torch

    s = importlib.import_module("tachyon.kernels.sampling")
    s.MAX_CHUNKS, s.CANDIDATES, s.STREAM_BLOCK, s.HIST_BINS = max_chunks, cap, stream_block, bins
    gen = torch.Generator().manual_seed(12)
    V = 500 if stream_block == 128 else 152064
    logits = torch.stack([torch.randn(V, generator=gen) * sc for sc in SCALES]).cuda()
    B = len(CASES)
    col = [torch.tensor([c[i] for c in CASES]) for i in range(4)]
    tok = s.sample_triton(logits, temperature=col[0].float().cuda(), top_k=col[1].to(torch.int32).cuda(),
                          top_p=col[2].float().cuda(), min_p=col[3].float().cuda(), seeds=torch.arange(B).cuda(),
                          steps=torch.full((B,), 3).cuda())
    torch.cuda.synchronize()
    return tok.tolist()


def main() -> None:
    if len(sys.argv) > 1:
        print("ok", run_one(*map(int, sys.argv[1:])))
        return
    for cfg in CONFIGS:
        r = subprocess.run([sys.executable, __file__, *cfg.split()], capture_output=True, text=True, timeout=120)
        lines = (r.stdout + r.stderr).strip().splitlines()
        print(cfg, "rc", r.returncode, lines[-1][:200] if lines else "", flush=True)


if __name__ == "__main__":
    main()
