"""Skinny GEMM sweep on the GPU: for every projection shape of the given model shapes, at M = 1 and SMALL_M,
cuBLAS against each Triton config (graph-timed, weights cycled past the L2 as in a decode step),
with the bandwidth each reaches and the config the engine would pick.
--fp8: the same for FP8 weights (quant_fp8.py): cuBLASLt's scaled GEMM against the FP8 GEMV / skinny GEMM,
the input already quantized (as the fused norm / activation kernels hand it over); the floor is the FP8 bytes;
--grid adds a grid of batch-1 GEMV configs beyond the candidate list.

Usage (GPU machine, repo root): python3 benchmarks/kernels/gemv_sweep.py --out $OUT [--shapes ...] [--fp8 [--grid]]
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from tachyon.kernels.gemm_small import SMALL_CONFIGS, SMALL_M, gemm_small_triton  # noqa: E402
from tachyon.kernels.gemv import CONFIGS, gemv_triton  # noqa: E402
from tachyon.kernels.gemv_select import _graph_time_ms, pick_gemv_config, pick_small_config  # noqa: E402
from tachyon.models.shapes import BUILTIN_SHAPES  # noqa: E402

COPY_BW = 4.25e12


def projections(shape: str) -> dict[str, tuple[int, int, bool]]:
    c = BUILTIN_SHAPES[shape]
    h, d = c["hidden_size"], c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    q, kv, inter = c["num_attention_heads"] * d, c["num_key_value_heads"] * d, c["intermediate_size"]
    bias = bool(c.get("attention_bias", c.get("model_type") == "qwen2"))
    return {"qkv": (q + 2 * kv, h, bias), "o": (h, q, False), "gate_up": (2 * inter, h, False),
            "down": (h, inter, False)}


def step_weights(shape: str, names: list[str], dev: torch.device):
    """For each projection of `shape` in `names` ("lm_head" too): (name, N, K, w, bias or None, copies, g), with
    seeded random bf16 weights, copies of w totalling twice the L2 (cycled, each call streams its weight from
    HBM as in a decode step) and the generator for the inputs."""
    projs = projections(shape)
    c = BUILTIN_SHAPES[shape]
    projs["lm_head"] = (c["vocab_size"], c["hidden_size"], False)
    l2 = torch.cuda.get_device_properties(dev).L2_cache_size
    for name in names:
        n, k, has_bias = projs[name]
        g = torch.Generator(device=dev).manual_seed(0)
        w = (torch.randn(n, k, device=dev, generator=g) * 0.02).to(torch.bfloat16)
        b = (torch.randn(n, device=dev, generator=g) * 0.02).to(torch.bfloat16) if has_bias else None
        copies = [w] + [w.clone() for _ in range(max(1, -(-2 * l2 // (w.numel() * 2))) - 1)]
        yield name, n, k, w, b, copies, g
        del copies
        torch.cuda.empty_cache()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="out")
    ap.add_argument("--shapes", default="qwen3-0.6b,qwen2.5-7b")
    ap.add_argument("--ms", default=f"1,{SMALL_M}", help="row counts to sweep (1 and/or SMALL_M)")
    ap.add_argument("--small-configs", default=None,
                    help="skinny-GEMM candidates to time instead of SMALL_CONFIGS, e.g. '[(1,16,256,1,1,1)]'")
    ap.add_argument("--configs", default=None, help="batch-1 candidates to time instead of CONFIGS")
    ap.add_argument("--projs", default="qkv,o,gate_up,down")
    ap.add_argument("--no-pick", action="store_true", help="skip the warm-up's pick (it re-times the candidates)")
    ap.add_argument("--fp8", action="store_true", help="FP8 weights and inputs (W8A8)")
    ap.add_argument("--grid", action="store_true", help="with --fp8: also a grid of batch-1 GEMV configs")
    args = ap.parse_args()
    if args.fp8:
        return sweep_fp8(args)
    small = tuple(ast.literal_eval(args.small_configs)) if args.small_configs else SMALL_CONFIGS
    plain = tuple(ast.literal_eval(args.configs)) if args.configs else CONFIGS
    rows = []
    for shape in args.shapes.split(","):
        for name, (n, k, bias) in projections(shape).items():
            if name not in args.projs.split(","):
                continue
            w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02
            b = torch.randn(n, device="cuda", dtype=torch.bfloat16) if bias else None
            weights = [w] + [w.clone() for _ in range(max(0, -(-(160 << 20) // (w.numel() * 2)) - 1))]
            nbytes = w.numel() * 2
            for m in (int(v) for v in args.ms.split(",")):
                x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
                res = dict(shape=shape, proj=name, N=n, K=k, M=m, floor_us=1e6 * nbytes / COPY_BW)
                res["cublas_us"] = 1e3 * _graph_time_ms(lambda wi, x=x, b=b: F.linear(x, wi, b), weights)
                res["configs"] = {}
                for cfg in plain if m == 1 else small:
                    kern = gemv_triton if m == 1 else gemm_small_triton
                    try:
                        us = 1e3 * _graph_time_ms(lambda wi, cfg=cfg, x=x, b=b, kern=kern: kern(x, wi, b, cfg),
                                                  weights)
                    except Exception as e:  # noqa: BLE001
                        us = f"error: {e}"[:200]
                    res["configs"][str(cfg)] = us
                res["picked"] = (None if args.no_pick else pick_gemv_config(w, b) if m == 1 else
                                 pick_small_config(w, b, m) if args.small_configs is None else None)
                rows.append(res)
                print("    " + "  ".join(f"{c} {v:.1f}" if isinstance(v, float) else f"{c} {v}"
                                      for c, v in res["configs"].items()), flush=True)
                best = min((v for v in res["configs"].values() if isinstance(v, float)), default=float("nan"))
                print(f"{shape:11s} {name:8s} M={m} N={n:6d} K={k:6d} floor {res['floor_us']:7.1f} us  "
                      f"cuBLAS {res['cublas_us']:7.1f} ({res['floor_us'] / res['cublas_us']:4.0%})  "
                      f"best triton {best:7.1f} ({res['floor_us'] / best:4.0%})  picked {res['picked']}", flush=True)
            del weights, w
            torch.cuda.empty_cache()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gemv_sweep.json").write_text(json.dumps(dict(gpu=torch.cuda.get_device_name(), rows=rows), indent=1))


def _grid() -> tuple:
    """Batch-1 GEMV configs (BLOCK_N, BLOCK_K, warps, stages) holding 2-16 Ki weight elements per tile."""
    pairs = [(bn, bk) for bn in (2, 4, 8, 16, 32) for bk in (256, 512, 1024, 2048) if 2048 <= bn * bk <= 16384]
    return tuple((bn, bk, w, st) for bn, bk in pairs for w in (4, 8) for st in (1, 3))


def sweep_fp8(args) -> None:
    from tachyon.kernels import quant_fp8 as q8

    plain = tuple(ast.literal_eval(args.configs)) if args.configs else q8.FP8_GEMV_CONFIGS
    if args.grid:
        plain = tuple(dict.fromkeys(plain + _grid()))
    small = q8.FP8_SMALL_CONFIGS + q8.FP8_SMALL_FAST_CONFIGS
    rows = []
    for shape in args.shapes.split(","):
        for name, (n, k, bias) in projections(shape).items():
            if name not in args.projs.split(","):
                continue
            w_q, w_s = q8.quantize_weight(torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02)
            b = torch.randn(n, device="cuda", dtype=torch.bfloat16) if bias else None
            weights = [w_q] + [w_q.clone() for _ in range(max(0, -(-(160 << 20) // w_q.numel()) - 1))]
            for m in (int(v) for v in args.ms.split(",")):
                xq = q8.quantize_rows_triton(torch.randn(m, k, device="cuda", dtype=torch.bfloat16))
                res = dict(shape=shape, proj=name, N=n, K=k, M=m, fp8=True, floor_us=1e6 * n * k / COPY_BW)
                res["cublaslt_us"] = 1e3 * _graph_time_ms(
                    lambda wi, xq=xq, b=b, s=w_s: q8.fp8_linear_cuda(xq, wi, s, b, torch.bfloat16), weights)
                res["configs"] = {}
                cands = [("gemv", c) for c in plain] if m == 1 else []
                cands += [("small", c) for c in small]  # the skinny GEMM at M = 1 too (its tile pads the rows)
                for kind, cfg in cands:
                    kern = q8.fp8_gemv_triton if kind == "gemv" else q8.fp8_gemm_small_triton
                    try:
                        us = 1e3 * _graph_time_ms(lambda wi, cfg=cfg, xq=xq, b=b, kern=kern, s=w_s: kern(
                            xq, wi, s, b, cfg, torch.bfloat16), weights)
                    except Exception as e:  # noqa: BLE001
                        us = f"error: {e}"[:200]
                    res["configs"][f"{kind} {cfg}"] = us
                rows.append(res)
                ranked = sorted((v, c) for c, v in res["configs"].items() if isinstance(v, float))
                print(f"{shape:11s} {name:8s} M={m} N={n:6d} K={k:6d} floor {res['floor_us']:6.1f} us  cuBLASLt "
                      f"{res['cublaslt_us']:6.1f} ({res['floor_us'] / res['cublaslt_us']:4.0%})  best: " + "  ".join(
                          f"{c} {v:.1f} ({res['floor_us'] / v:.0%})" for v, c in ranked[:4]), flush=True)
            del weights, w_q
            torch.cuda.empty_cache()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gemv_sweep_fp8.json").write_text(json.dumps(dict(gpu=torch.cuda.get_device_name(), rows=rows), indent=1))


if __name__ == "__main__":
    main()
