"""Check the fused qkv_post kernel against its reference on the GPU and time it against the separate
launches it replaces (q/k norm copies + rmsnorm, rotary, store_kv), both replayed from a CUDA graph.

GPU:  python3 benchmarks/kernels/fused_check.py --out $OUT     (about 20-40 s on an H200)
CPU:  python3 benchmarks/kernels/fused_check.py --smoke        (Triton interpreter, tiny shapes, no timing)

Shapes: Qwen3-0.6B (Hq 16, Hkv 8, D 128, q/k norm) and Qwen2.5-7B (Hq 28, Hkv 4, D 128, no norm),
T in {1, 256, 4096}, bf16, page size 16. A row passes when q and the stored K are within a relative
(Frobenius) error of 1e-2 of `qkv_post_ref`, V is stored exactly and no other cache slot changes.
Writes fused_check.json to --out (a directory; a path ending in .json is used as the file itself).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SMOKE = "--smoke" in sys.argv
if SMOKE:
    os.environ["TRITON_INTERPRET"] = "1"
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

import tachyon.kernels as K  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import graph_time_us as _graph_time_us  # noqa: E402
from timing import rel_err  # noqa: E402

BW = 4.25e12  # H200 copy bandwidth, B/s (BENCHMARKS.md)
TOL = 1e-2
PAGE = 16
MAX_POS = 32768
# name -> (Hq, Hkv, D, qk_norm, layers)
MODELS = {
    "Qwen3-0.6B": (16, 8, 128, True, 28),
    "Qwen2.5-7B": (28, 4, 128, False, 28),
}
TOKENS = [1, 256, 4096]
if SMOKE:
    MODELS = {"qwen3-tiny": (4, 2, 32, True, 2), "qwen2-tiny": (7, 1, 32, False, 2)}
    TOKENS = [1, 5]
DEV = "cpu" if SMOKE else "cuda"
DT = torch.float32 if SMOKE else torch.bfloat16


def _graph_time_us_smoke(fn: Callable[[], object], reps: int = 10) -> float | None:
    return _graph_time_us(fn, reps, rep_ms=50, smoke=SMOKE)


def eager_time_us(fn: Callable[[], object]) -> float | None:
    if SMOKE:
        return None
    import triton.testing

    return triton.testing.do_bench(fn, warmup=10, rep=50, return_mode="median") * 1e3


def make_inputs(Hq: int, Hkv: int, D: int, qk_norm: bool, T: int, gen: torch.Generator) -> dict:
    """Decode-like inputs: random positions, distinct random slots (every 7th token from the 4th skipped)."""
    num_blocks = -(-T // PAGE) + 8
    inv_freq = 1.0 / (1e6 ** (torch.arange(0, D, 2, dtype=torch.float32) / D))
    max_pos = 64 if SMOKE else MAX_POS
    slots = torch.randperm(num_blocks * PAGE, generator=gen)[:T]
    slots[3::7] = -1
    weights = [(1 + 0.2 * torch.randn(D, generator=gen)).to(DEV, DT) for _ in range(2)] if qk_norm else [None] * 2
    return dict(
        qkv=(2 * torch.randn(T, (Hq + 2 * Hkv) * D, generator=gen)).to(DEV, DT),
        positions=torch.randint(0, max_pos, (T,), generator=gen).to(DEV),
        cos_sin_cache=K.rope_cos_sin_cache(inv_freq.to(DEV), max_pos),
        kv_cache=torch.randn(2, num_blocks, PAGE, Hkv, D, generator=gen).to(DEV, DT),
        slot_mapping=slots.to(DEV),
        q_norm_weight=weights[0],
        k_norm_weight=weights[1],
        eps=1e-6,
        num_heads=Hq,
        num_kv_heads=Hkv,
        head_dim=D,
    )


def old_sequence(a: dict) -> torch.Tensor:
    """What Attention.forward launched before the fusion (through the same dispatchers)."""
    Hq, Hkv, D = a["num_heads"], a["num_kv_heads"], a["head_dim"]
    t = a["qkv"].shape[0]
    q, k, v = a["qkv"].split([Hq * D, Hkv * D, Hkv * D], dim=-1)
    q, k, v = q.reshape(t, Hq, D), k.reshape(t, Hkv, D), v.reshape(t, Hkv, D)
    if a["q_norm_weight"] is not None:
        q = K.rmsnorm(q, a["q_norm_weight"], a["eps"])[0]
        k = K.rmsnorm(k, a["k_norm_weight"], a["eps"])[0]
    q, k = K.rotary(q, k, a["positions"], a["cos_sin_cache"])
    K.store_kv(k, v, a["kv_cache"], a["slot_mapping"])
    return q


def check_row(model: str, T: int, gen: torch.Generator) -> dict:
    Hq, Hkv, D, qk_norm, layers = MODELS[model]
    a = make_inputs(Hq, Hkv, D, qk_norm, T, gen)
    qkv0, cache0 = a["qkv"].clone(), a["kv_cache"].clone()
    cache_ref = cache0.clone()
    q_ref = K.qkv_post_ref(**dict(a, kv_cache=cache_ref))
    cache_tri = cache0.clone()
    q_tri = K.qkv_post_triton(**dict(a, kv_cache=cache_tri))
    if not SMOKE:
        torch.cuda.synchronize()
    keep = a["slot_mapping"] >= 0
    slots = a["slot_mapping"][keep]
    blk, off = slots // PAGE, slots % PAGE
    untouched = torch.ones(cache0.shape[1] * PAGE, dtype=torch.bool, device=cache0.device)
    untouched[slots] = False
    err_q = rel_err(q_tri, q_ref)
    err_k = rel_err(cache_tri[0, blk, off], cache_ref[0, blk, off]) if len(slots) else 0.0
    v_exact = bool(torch.equal(cache_tri[1, blk, off], cache_ref[1, blk, off]))
    others_same = bool(torch.equal(cache_tri.flatten(1, 2)[:, untouched], cache0.flatten(1, 2)[:, untouched]))
    qkv_same = bool(torch.equal(a["qkv"], qkv0))
    ok = err_q <= TOL and err_k <= TOL and v_exact and others_same and qkv_same and q_tri.is_contiguous()

    # bytes that must move: read q|k|v (+ the cos/sin row), write q, K and V
    elem = a["qkv"].element_size()
    nbytes = T * ((Hq + 2 * Hkv) * D * elem + D * 4 + (Hq + 2 * Hkv) * D * elem)
    floor = nbytes / BW * 1e6
    fused_fn = lambda: K.qkv_post(**a)  # noqa: E731
    old_fn = lambda: old_sequence(a)  # noqa: E731
    row = dict(
        model=model, T=T, Hq=Hq, Hkv=Hkv, D=D, qk_norm=qk_norm, rel_err_q=err_q, rel_err_k=err_k,
        v_exact=v_exact, untouched_slots_same=others_same, qkv_unmodified=qkv_same, ok=bool(ok),
        fused_graph_us=_graph_time_us_smoke(fused_fn), old_graph_us=_graph_time_us_smoke(old_fn),
        fused_eager_us=eager_time_us(fused_fn), old_eager_us=eager_time_us(old_fn),
        floor_us=floor, layers=layers,
    )
    if row["fused_graph_us"] and row["old_graph_us"]:
        row["saved_per_layer_us"] = row["old_graph_us"] - row["fused_graph_us"]
        row["saved_per_step_us"] = row["saved_per_layer_us"] * layers
    return row


def fmt(x: float | None, spec: str = "8.1f") -> str:
    return format(x, spec) if isinstance(x, (int, float)) else " " * (int(spec.split(".")[0]) - 1) + "-"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--smoke", action="store_true", help="CPU, Triton interpreter, tiny shapes, no timing")
    args = ap.parse_args()
    out = Path(args.out)
    path = out if out.suffix == ".json" else out / "fused_check.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not SMOKE and not torch.cuda.is_available():
        print("no CUDA device; use --smoke on CPU", file=sys.stderr)
        return 2
    import triton

    env = dict(
        torch=torch.__version__, triton=triton.__version__, python=platform.python_version(),
        device=torch.cuda.get_device_name() if not SMOKE else "cpu (interpreter)", dtype=str(DT),
        git_sha=os.environ.get("GIT_SHA"),
    )
    gen = torch.Generator().manual_seed(0)
    rows: list[dict] = []
    t0 = time.perf_counter()
    for model in MODELS:
        for T in TOKENS:
            try:
                row = check_row(model, T, gen)
            except Exception as e:  # noqa: BLE001 - keep going; the row records the failure
                traceback.print_exc()
                row = dict(model=model, T=T, ok=False, error=repr(e)[:500])
            rows.append(row)
            path.write_text(json.dumps(dict(env=env, rows=rows), indent=1))
            print(f"{model} T={T}: ok={row['ok']} ({time.perf_counter() - t0:.1f} s)", flush=True)

    print(f"\n{'model':12s} {'T':>5s} {'ok':>3s} {'err q':>8s} {'err k':>8s} {'fused graph':>11s} "
          f"{'old graph':>9s} {'saved/layer':>11s} {'fused eager':>11s} {'old eager':>9s} {'floor':>7s}  (us)")
    for r in rows:
        if "error" in r:
            print(f"{r['model']:12s} {r['T']:5d} ERR {r['error'][:80]}")
            continue
        print(f"{r['model']:12s} {r['T']:5d} {'yes' if r['ok'] else 'NO':>3s} {r['rel_err_q']:8.1e} "
              f"{r['rel_err_k']:8.1e} {fmt(r['fused_graph_us'], '11.2f')} {fmt(r['old_graph_us'], '9.2f')} "
              f"{fmt(r.get('saved_per_layer_us'), '11.2f')} {fmt(r['fused_eager_us'], '11.1f')} "
              f"{fmt(r['old_eager_us'], '9.1f')} {fmt(r['floor_us'], '7.2f')}")
    all_ok = all(r["ok"] for r in rows)
    print(f"\n{'ALL OK' if all_ok else 'FAILURES'}; {time.perf_counter() - t0:.1f} s; wrote {path}")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
