"""Check every Tachyon kernel against its reference at real sizes and time it against its floor.

GPU:  cd benchmarks/kernels && python3 run_all.py --out $OUT
CPU:  python3 benchmarks/kernels/run_all.py --smoke   (Triton interpreter, tiny shapes, no timing)

Shapes are Qwen2.5-7B's (Hq 28, Hkv 4, D 128, hidden 3584, intermediate 18944, vocab 152064), bf16.
Floor = max(bytes that must move / 4.25e12 B/s, FLOPs / 778e12 FLOP/s) (H200, BENCHMARKS.md).
Writes kernels.json and kernels.md to --out (default $OUT or ./out); prints the table last.
This file: the CLI and the elementwise kernels; harness.py (settings, timing, rows), bench_attention.py and
bench_sampling.py hold the rest.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
# harness, imported by the sibling modules below ahead of tachyon, reads --smoke and sets TRITON_INTERPRET
import torch
from bench_attention import b_attention, b_store_kv, sweep_attention
from bench_layer import b_layer_bs1
from bench_sampling import b_penalties, b_sample, b_sample_distribution, sweep_sampling
from harness import BW, DEV, DT, FLOPS, HIDDEN, HKV, HQ, INTER, PARTIAL, ROOT, ROWS, SMOKE, SWEEP, D, guarded, record
from timing import env as _env
from timing import markdown, rel_err

import tachyon.kernels as K

# ------------------------------------------------------------------------------------ elementwise kernels


@guarded
def b_rmsnorm(T: int, gen):
    """Fused residual add + RMSNorm of T rows: both outputs within rel err 1e-2 of the reference."""
    x = torch.randn(T, HIDDEN, device=DEV, dtype=DT, generator=gen)
    r = torch.randn(T, HIDDEN, device=DEV, dtype=DT, generator=gen)
    w = 1 + 0.1 * torch.randn(HIDDEN, device=DEV, dtype=DT, generator=gen)
    out, h = K.rmsnorm_triton(x, w, 1e-6, r)
    ro, rh = K.rmsnorm_ref(x, w, 1e-6, r)
    err = max(rel_err(out, ro), rel_err(h, rh))
    record("rmsnorm+residual", f"T={T} H={HIDDEN}", lambda: K.rmsnorm_triton(x, w, 1e-6, r),
           4 * T * HIDDEN * 2, 0, err, 1e-2, ref_fn=lambda: K.rmsnorm_ref(x, w, 1e-6, r))


@guarded
def b_rotary(T: int, gen):
    """In-place rotary embedding of T tokens' q and k at random positions: rel err <= 1e-2."""
    inv = 1.0 / (1e6 ** (torch.arange(0, D, 2, dtype=torch.float32) / D))
    cache = K.rope_cos_sin_cache(inv, 32768).to(DEV)
    pos = torch.randint(0, 32768, (T,), device=DEV, generator=gen)
    q = torch.randn(T, HQ, D, device=DEV, dtype=DT, generator=gen)
    k = torch.randn(T, HKV, D, device=DEV, dtype=DT, generator=gen)
    qt, kt = K.rotary_triton(q.clone(), k.clone(), pos, cache)
    qr, kr = K.rotary_ref(q.clone(), k.clone(), pos, cache)
    err = max(rel_err(qt, qr), rel_err(kt, kr))
    q2, k2 = q.clone(), k.clone()
    nbytes = 2 * T * (HQ + HKV) * D * 2 + T * D * 4 + T * 8
    record("rotary", f"T={T}", lambda: K.rotary_triton(q2, k2, pos, cache), nbytes, 0, err, 1e-2,
           ref_fn=lambda: K.rotary_ref(q2, k2, pos, cache))


@guarded
def b_silu(T: int, gen):
    """silu(gate) * up of T rows: rel err <= 1e-2."""
    x = torch.randn(T, 2 * INTER, device=DEV, dtype=DT, generator=gen)
    err = rel_err(K.silu_and_mul_triton(x), K.silu_and_mul_ref(x))
    record("silu_and_mul", f"T={T} I={INTER}", lambda: K.silu_and_mul_triton(x), 3 * T * INTER * 2, 0, err,
           1e-2, ref_fn=lambda: K.silu_and_mul_ref(x))


# ------------------------------------------------------------------------------------ main


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--smoke", action="store_true", help="CPU: Triton interpreter, tiny shapes")
    ap.add_argument("--only", default="", help="comma-separated kernel families to run (default: all), e.g. penalties")
    args = ap.parse_args()
    if not SMOKE and not torch.cuda.is_available():
        sys.exit("no CUDA device (use --smoke on CPU)")
    gen = torch.Generator(device=DEV).manual_seed(0)
    t0 = time.time()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    PARTIAL.append(out / "kernels_partial.json")
    only = set(filter(None, args.only.split(",")))
    if only:
        _run_only(only, gen)
    else:
        _run_all(gen)
    result = dict(env=_env(ROOT), smoke=SMOKE, bandwidth_Bps=BW, flops_per_s=FLOPS, wall_s=time.time() - t0, rows=ROWS,
                  sweep=SWEEP)
    (out / "kernels.json").write_text(json.dumps(result, indent=1))
    table = markdown(ROWS)
    (out / "kernels.md").write_text(table)
    print(json.dumps(result["env"]))
    print(table)
    bad = [r for r in ROWS if not r.get("ok")]
    print(f"{len(ROWS) - len(bad)}/{len(ROWS)} ok; wall {time.time() - t0:.0f}s")


def _run_only(only: set[str], gen) -> None:
    known = {"penalties": lambda: [b_penalties(B, gen) for B in ([1, 64, 256] if not SMOKE else [2])],
             "layer_bs1": lambda: _run_layer(gen)}
    unknown = only - set(known)
    if unknown:
        sys.exit(f"--only: unknown kernel families {sorted(unknown)}; known: {sorted(known)}")
    for name in sorted(only):
        known[name]()


def _run_all(gen) -> None:
    ctxs = [512, 4096] if not SMOKE else [40, 130]
    batches = [1, 64, 256] if not SMOKE else [1, 3]
    for T in ([256, 4096] if not SMOKE else [5]):
        b_store_kv(T, gen)
    for B in batches:
        for ctx in ctxs:
            b_attention(f"decode B={B} ctx={ctx}", [(ctx - 1, 1)] * B, gen, time_ref=B <= 64)
    if not SMOKE:
        b_attention("decode B=1 ctx=4096 no split", [(4095, 1)], gen, splits=1, time_ref=False)
        b_attention("decode B=1 ctx=4096 max_seq_len=32768", [(4095, 1)], gen, time_ref=False, max_seq_len=32768)
        b_attention("decode B=64 ctx=1024 max_seq_len=32768", [(1023, 1)] * 64, gen, time_ref=False,
                    max_seq_len=32768)
        b_attention("decode B=8 ctx=2048..4096", [(2047 + 256 * i, 1) for i in range(8)], gen)
        spread = [(200 + (i * 677) % 1400, 1) for i in range(160)]  # a flat step's decodes: contexts 200-1,599
        b_attention("decode B=160 ctx=200..1600", spread, gen, time_ref=False)
        b_attention("decode B=160 ctx=200..1600 longest first", spread, gen, time_ref=False, longest_first=True)
        b_attention("prefill 1x4096", [(0, 4096)], gen)
        b_attention("prefill 4x1024 after 1024 cached", [(1024, 1024)] * 4, gen)
        b_attention("mixed 2048 chunk + 64 decodes", [(2048, 2048)] + [(1023, 1)] * 64, gen, time_ref=False)
    else:
        b_attention("prefill smoke", [(0, 37), (20, 5), (9, 1)], gen)
    for T in ([1, 256, 4096] if not SMOKE else [3]):
        b_rmsnorm(T, gen)
        b_rotary(T, gen)
        b_silu(T, gen)
    for B in ([1, 8, 256] if not SMOKE else [2]):
        for mode in ["greedy", "temperature", "top_p0.9", "top_k50", "k50_p0.9_minp0.05"]:
            b_sample(B, mode, gen)
    for B in ([1, 64, 256] if not SMOKE else [2]):
        b_penalties(B, gen)
    _run_layer(gen)
    b_sample_distribution(gen)
    sweep_attention(gen)
    sweep_sampling(gen)


def _run_layer(gen) -> None:
    """The batch-1 layer kernel, both forms on the GPU; the interpreter passes no grid barrier: five launches only."""
    for ctx in ([256, 4096] if not SMOKE else [40]):
        if not SMOKE:
            b_layer_bs1(ctx, gen, False, "next")
            b_layer_bs1(ctx, gen, False, "early")
        b_layer_bs1(ctx, gen, True)


if __name__ == "__main__":
    main()
