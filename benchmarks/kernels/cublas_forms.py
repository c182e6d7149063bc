"""Which way of asking cuBLAS for a decode-step projection is fastest at 64-256 rows? For each projection of the
given shapes (and the lm_head), graph-timed with the weights cycled past the L2:
  linear     F.linear(x, W) (+ bias): what Linear.forward runs (the step trace shows split-K with its memset and
             reduce on the down projection, and 144-tile grids on qkv)
  swapped    torch.mm(W, x^T): the transposed problem (rows on cuBLAS's N side), output left transposed
  swapped_c  the same, then made row-contiguous (what a consumer that needs rows would pay)
  lt         F.linear with torch's cuBLASLt backend (preferred_blas_library)
and for the lm_head the fp32 logits the decode graphs keep: F.linear(...).float() against torch.mm with
out_dtype=float32 (cuBLAS writes fp32 itself; no conversion kernel).
Writes cublas_forms.json and prints one line per (projection, rows).
Caveat: the engine's per-shape cuBLASLt picks (which switched torch's library the same way, around single
GEMMs) cost Qwen3-0.6B bs1 2% through a side effect not yet identified (session 13). Forms timed after the
first `lt` call may carry it too.

Usage (GPU machine, repo root): python3 benchmarks/kernels/cublas_forms.py --out $OUT [--shapes ...] [--ms ...]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from gemv_sweep import step_weights  # noqa: E402
from timing import env  # noqa: E402

from tachyon.kernels.gemv_select import _graph_time_ms  # noqa: E402


def lt(fn):
    """fn run with torch's cuBLASLt backend selected, the default restored after."""
    def run(*a):
        prev = torch.backends.cuda.preferred_blas_library()
        torch.backends.cuda.preferred_blas_library("cublaslt")
        try:
            return fn(*a)
        finally:
            torch.backends.cuda.preferred_blas_library(prev)
    return run


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="out")
    ap.add_argument("--shapes", default="qwen2.5-7b")
    ap.add_argument("--ms", default="64,80,96,112,128,160,192,224,256")
    args = ap.parse_args()
    dev = torch.device("cuda")
    out = {"env": env(Path(__file__).resolve().parents[2]), "results": []}
    for shape in args.shapes.split(","):
        for name, n, k, _w, b, weights, g in step_weights(shape, ["qkv", "o", "gate_up", "down", "lm_head"], dev):
            for m in (int(v) for v in args.ms.split(",")):
                x = torch.randn(m, k, device=dev, generator=g).to(torch.bfloat16)
                forms = {
                    "linear": lambda wi, x=x, b=b: F.linear(x, wi, b),
                    "swapped": lambda wi, x=x: torch.mm(wi, x.t()),
                    "swapped_c": lambda wi, x=x: torch.mm(wi, x.t()).t().contiguous(),
                    "lt": lt(lambda wi, x=x, b=b: F.linear(x, wi, b)),
                }
                if name == "lm_head":
                    forms = {"linear_float": lambda wi, x=x: F.linear(x, wi).float(),
                             "mm_fp32": lambda wi, x=x: torch.mm(x, wi.t(), out_dtype=torch.float32),
                             "swapped_fp32": lambda wi, x=x: torch.mm(wi, x.t(), out_dtype=torch.float32),
                             **forms}
                row = dict(shape=shape, proj=name, n=n, k=k, m=m, us={})
                for f, fn in forms.items():
                    try:
                        row["us"][f] = round(_graph_time_ms(fn, weights) * 1e3, 2)
                    except Exception as e:  # noqa: BLE001 - a form this torch / GPU lacks
                        row["us"][f] = repr(e)[:120]
                out["results"].append(row)
                print(f"{shape} {name:8s} m={m:3d} " + "  ".join(f"{f} {v}" for f, v in row["us"].items()), flush=True)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "cublas_forms.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
