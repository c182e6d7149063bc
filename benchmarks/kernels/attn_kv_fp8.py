"""The attention kernels over a bf16 and an e4m3 (kv_cache_dtype="fp8") cache, the same batches side by side,
each against its own byte floor (run_all.py's rows, timing and table: harness.py, bench_attention.py).

GPU:  python3 benchmarks/kernels/attn_kv_fp8.py --out $OUT [--widen-sweep]
CPU:  python3 benchmarks/kernels/attn_kv_fp8.py --smoke [--widen-sweep]   (Triton interpreter, tiny shapes, no timing)
--widen-sweep: the e4m3 decode rows again for each way of widening the cache's tiles (TACHYON_KV8_WIDEN,
WIDEN_SWEEP) and each unsplit key tile in WIDEN_TILES (TACHYON_DECODE_UNSPLIT_TILE; split launches keep theirs), each
row named by both. --widen-batches: only e4m3 decode rows at 1,024 keys, batches 64-256, cvt against cvt:asm.
--widen-spread: the same, with each batch's contexts drawn uniform over a range (as a serving step's are) and at the
range's mean for all (stop 60: mixed_attn_tiles.py timed cvt:asm 42% slower on 96 decodes over 200-1,600 keys).
(Until 8f3e4bb this was `run_all.py --kv-fp8`; session 12's attn_kvfp8_8f3e4bb/ ran that.)
"""

import argparse
import json
import os
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness as H  # (reads --smoke from sys.argv at import, as run_all.py does)
import torch
from bench_attention import b_attention
from timing import env, markdown

WIDEN_TILES = ("128:4:2", "128:4:3", "256:4:2")  # the first is DECODE_CONFIG's bf16 entry
WIDEN_SWEEP = ("cvt", "asm", "cvt:asm", "asm:cvt")  # TACHYON_KV8_WIDEN (K:V); bits (integer ops) is asm's CPU stand-in


def _e4m3_decode_row(name: str, specs, gen, **knobs: str) -> None:
    """One e4m3 decode row with the environment knobs `knobs` set only around it (a CUDA graph keeps what was in
    force at its capture)."""
    os.environ.update(knobs)
    try:
        b_attention(name, specs, gen, time_ref=False, kv_dtype=torch.float8_e4m3fn)
    finally:
        for k in knobs:
            os.environ.pop(k)


def widen_sweep(cases, gen) -> None:
    """The e4m3 decode rows under every (TACHYON_KV8_WIDEN mode, unsplit tile)."""
    tiles = WIDEN_TILES if not H.SMOKE else ("16:4:1",)
    for name, specs in cases:
        for mode in WIDEN_SWEEP:
            for tile in tiles:
                _e4m3_decode_row(f"{name} widen={mode} tile={tile}", specs, gen, TACHYON_KV8_WIDEN=mode,
                                 TACHYON_DECODE_UNSPLIT_TILE=tile)


def widen_batches(gen) -> None:
    """Where cvt:asm starts to pay (attention_config.KV8_SPLIT_WIDEN_MIN_PROGRAMS_PER_SM): e4m3 decode rows at 1,024
    keys for batches between stop 58's two measured points, both widenings forced."""
    batches = (64, 96, 128, 160, 192, 256) if not H.SMOKE else (2, 3)
    ctx = 1024 if not H.SMOKE else 40
    for B in batches:
        for mode in ("cvt", "cvt:asm"):
            _e4m3_decode_row(f"decode B={B} ctx={ctx} widen={mode}", [(ctx - 1, 1)] * B, gen, TACHYON_KV8_WIDEN=mode)


def widen_spread(gen) -> None:
    """cvt against cvt:asm on decode batches whose contexts are spread (uniform over lo..hi, seeded) or all at the
    range's mean: does the spread, not the batch, decide which widening wins?"""
    batches = (64, 96, 128, 192, 256) if not H.SMOKE else (3,)
    ranges = ((200, 1600), (100, 800), (1000, 3000)) if not H.SMOKE else ((20, 60),)
    rng = random.Random(0)
    for lo, hi in ranges:
        for B in batches:
            spread = [(rng.randint(lo, hi) - 1, 1) for _ in range(B)]
            for label, specs in ((f"{lo}-{hi}", spread), (f"={(lo + hi) // 2}", [((lo + hi) // 2 - 1, 1)] * B)):
                for mode in ("cvt", "cvt:asm"):
                    _e4m3_decode_row(f"decode B={B} ctx {label} widen={mode}", specs, gen, TACHYON_KV8_WIDEN=mode)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--smoke", action="store_true", help="CPU: Triton interpreter, tiny shapes")
    ap.add_argument("--widen-sweep", action="store_true", help="e4m3 decode rows per widening mode and key tile")
    ap.add_argument("--widen-batches", action="store_true", help="only e4m3 decode rows, cvt against cvt:asm by batch")
    ap.add_argument("--widen-spread", action="store_true", help="only e4m3 decode rows over spread contexts")
    args = ap.parse_args()
    if not H.SMOKE and not torch.cuda.is_available():
        sys.exit("no CUDA device (use --smoke on CPU)")
    gen = torch.Generator(device=H.DEV).manual_seed(0)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    H.PARTIAL.append(out / "kernels_partial.json")
    decodes = [(f"decode B={B} ctx={ctx}", [(ctx - 1, 1)] * B) for B in ([64, 256] if not H.SMOKE else [3])
               for ctx in ([512, 2048] if not H.SMOKE else [40])]
    cases = list(decodes)
    cases += [("prefill 1x2048", [(0, 2048)] if not H.SMOKE else [(0, 37)]),
              ("prefill 4x512 after 512 cached", [(512, 512)] * 4 if not H.SMOKE else [(20, 5)])]
    if args.widen_batches:
        cases = []
        widen_batches(gen)
    if args.widen_spread:
        cases = []
        widen_spread(gen)
    for name, specs in cases:
        for kv_dtype in (None, torch.float8_e4m3fn):
            b_attention(name, specs, gen, time_ref=False, kv_dtype=kv_dtype)
    if args.widen_sweep:
        widen_sweep(decodes, gen)
    (out / "kernels_kv_fp8.json").write_text(json.dumps(dict(env=env(H.ROOT), smoke=H.SMOKE, rows=H.ROWS), indent=1))
    print(markdown(H.ROWS))


if __name__ == "__main__":
    main()
