"""Short-prefill GEMMs: cuBLAS (F.linear) against the Triton mid-size GEMM (kernels/gemm_mid.py) under each
candidate config, for every projection of Qwen3-0.6B and Qwen2.5-7B at M = 16 .. 512 rows, bf16. Times are per
call inside a CUDA graph of 16 back-to-back calls cycling over 8 copies of the weight (so it streams from HBM,
not L2, as a model's layers do), with PDL on for the Triton kernel as in the engine. Floor: weight bytes /
4.25 TB/s, or FLOPs / 778 TFLOP/s, whichever is larger.

Usage (GPU machine, repo root): python3 benchmarks/gpu/gemm_mid_sweep.py --out $OUT
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from tachyon.kernels.gemm_mid import gemm_mid_triton, mid_config  # noqa: E402

# (name, N, K, bias)
PROJ = {
    "qwen3-0.6b": [("qkv", 4096, 1024, False), ("o", 1024, 2048, False), ("gate_up", 6144, 1024, False),
                   ("down", 1024, 3072, False)],
    "qwen2.5-7b": [("qkv", 4608, 3584, True), ("o", 3584, 3584, False), ("gate_up", 37888, 3584, False),
                   ("down", 3584, 18944, False)],
}
CANDS = [(32, 32, 128, 4, 3), (32, 64, 128, 4, 3), (32, 32, 64, 4, 4), (64, 32, 128, 4, 3), (64, 32, 64, 4, 4),
         (64, 64, 64, 4, 4), (64, 64, 128, 4, 3), (64, 128, 64, 4, 3), (128, 32, 128, 4, 3), (128, 64, 64, 4, 4),
         (128, 64, 128, 8, 3), (128, 128, 64, 8, 3)]
COPIES, CALLS = 8, 16


def time_chain(fn, ws, replays: int = 10) -> float:
    """us per call of fn(w) over CALLS calls cycling through the weights ws, captured in one graph."""
    fn(ws[0])
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(CALLS):
            fn(ws[i % len(ws)])
    g.replay()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(replays):
        g.replay()
    b.record()
    torch.cuda.synchronize()
    return 1e3 * a.elapsed_time(b) / (replays * CALLS)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="out")
    ap.add_argument("--ms", default="16,32,64,128,256,512")
    args = ap.parse_args()
    dev = torch.device("cuda")
    ms = [int(v) for v in args.ms.split(",")]
    res: dict = {"cands": CANDS, "rows": []}
    for shape, projs in PROJ.items():
        for name, n, k, has_bias in projs:
            ws = [torch.randn(n, k, device=dev, dtype=torch.bfloat16) * 0.02 for _ in range(COPIES)]
            bias = torch.randn(n, device=dev, dtype=torch.bfloat16) if has_bias else None
            for m in ms:
                x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
                ref = F.linear(x.float(), ws[0].float(), None if bias is None else bias.float())
                floor = max(2 * n * k / 4.25e12, 2 * m * n * k / 778e12) * 1e6
                row = {"shape": shape, "proj": name, "m": m, "floor_us": round(floor, 2),
                       "cublas_us": round(time_chain(lambda w, x=x, b=bias: F.linear(x, w, b), ws), 2),
                       "triton_us": {}}
                for c in CANDS:
                    try:
                        y = gemm_mid_triton(x, ws[0], bias, c)
                        err = ((y.float() - ref).norm() / ref.norm()).item()
                        t = time_chain(lambda w, c=c, x=x, b=bias: gemm_mid_triton(x, w, b, c), ws)
                        row["triton_us"][":".join(map(str, c))] = [round(t, 2), round(err, 5)]
                    except Exception as e:  # e.g. out of shared memory for one config
                        row["triton_us"][":".join(map(str, c))] = f"failed: {type(e).__name__}"
                ok = {kk: v[0] for kk, v in row["triton_us"].items() if isinstance(v, list)}
                best = min(ok, key=ok.get)
                cur = mid_config(m, ws[0])
                row["table"] = ok.get(":".join(map(str, cur))) if cur else None
                res["rows"].append(row)
                top = " ".join(f"{kk}={v}" for kk, v in sorted(ok.items(), key=lambda kv: kv[1])[:3])
                print(f"{shape} {name} M={m}: floor {floor:.1f} cuBLAS {row['cublas_us']} best {best} {ok[best]} "
                      f"table {row['table']} | {top}", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gemm_mid_sweep.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
