"""The one-launch mixed attention (kernels/attention_mixed.py) on a flat-policy step's shape, by the chunk programs'
tile: what the chunk part adds over the decode part alone, and which tile adds least.

A step as engine/mixed_graph.py lays it out under flat on Qwen2.5-7B nano256 (stop 40's timeline: 146 decodes and
153 prompt tokens a step): D real decodes (contexts uniform in [lo, hi]) in decode bucket DB, two chunks (the end of
one prompt over its cached prefix, the start of the next) and the chunk bound t = DB + chunk bucket, which is the
max_query_len the mixed graphs pass. Each variant is timed as CUDA graphs of 28 calls (a step's layers),
replayed; µs per call. Variants: the decode kernel on the decode part alone, in batch order (`decode_only`) and
longest first (`decode_lpt`, TACHYON_DECODE_ORDER=lpt's order for decode-only steps), the two-launch form
(`two`), the one launch with its decode sequences longest first (`lpt`, TACHYON_MIXED_ORDER=lpt's order), and the
one launch under each TACHYON_MIXED_CHUNK_TILE given (`default`: none; stop 40 ran it at c4c8048,
where TACHYON_PREFILL_TILE set the chunk tile and the default was prefill_config's 64:64 x 4). Every variant's output is
compared with the default's on the rows it covers.

--kv-fp8: the cache in e4m3 (kv_cache_dtype="fp8"), and for each TACHYON_KV8_WIDEN mode in --widens the decode
kernel on the decode part (`decode_lpt@MODE`) and the one launch (`lpt@MODE`), both longest first as the engine runs
them; outputs compared with the default forms' (cvt unless the rule picks otherwise: attention_config.kv8_widen).
Stop 59 found stop 58's rule (cvt:asm in the mixed launch too) 1.4-1.8% slower on 7B nano256; this times why.

Usage (GPU machine, repo root): python3 benchmarks/gpu/mixed_attn_tiles.py --out DIR [--tiles 128:64:8:2,...]
[--kv-fp8 --widens cvt,cvt:asm]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from benchmarks.gpu.prefill_attn_sweep import time_call  # noqa: E402
from tachyon import kernels  # noqa: E402
from tachyon.kernels import attention_config  # noqa: E402
from tachyon.kernels.quant_fp8 import cast_to_cache_ref  # noqa: E402


def shuffled_block_tables(lens: list[int], page: int, gen: torch.Generator) -> tuple[torch.Tensor, int]:
    """Block tables (int32 [len(lens), most blocks], CPU) giving each sequence of lens[i] keys its own cache blocks,
    drawn in a shuffled order from a cache of the returned block count (one spare block)."""
    blocks = [-(-n // page) for n in lens]
    nblk = sum(blocks) + 1
    perm = torch.randperm(nblk, generator=gen)
    tables = torch.zeros(len(lens), max(blocks), dtype=torch.int32)
    used = 0
    for i, nb in enumerate(blocks):
        tables[i, :nb] = perm[used:used + nb].to(torch.int32)
        used += nb
    return tables, nblk


def build(decodes: int, bucket: int, chunks: list[tuple[int, int]], chunk_bucket: int, lo: int, hi: int,
          Hq: int = 28, Hkv: int = 4, D: int = 128, page: int = 16, seed: int = 0, kv_fp8: bool = False) -> dict:
    """A mixed step's tensors on the GPU (bf16; the cache e4m3 with kv_fp8): q over t = bucket + chunk_bucket rows, a
    paged cache holding every sequence's keys in shuffled blocks, the decode part (bucket sequences; those past
    `decodes` padding: one key) and the chunk part (chunk rows start at row `decodes`)."""
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    ctx = [rng.randint(lo, hi) for _ in range(decodes)]
    lens = ctx + [c + n for c, n in chunks]
    tables, nblk = shuffled_block_tables(lens, page, gen)
    max_blk = tables.shape[1]
    t = bucket + chunk_bucket
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    cache = (torch.randn(2, nblk, page, Hkv, D, generator=gen) * 0.5).to(torch.bfloat16)
    if kv_fp8:
        cache = cast_to_cache_ref(cache, torch.float8_e4m3fn)
    q = torch.randn(t, Hq, D, generator=gen).to(torch.bfloat16)
    dec_tables = torch.zeros(bucket, max_blk, dtype=torch.int32)
    dec_tables[:decodes] = tables[:decodes]
    dec_lens = torch.ones(bucket, dtype=torch.int32)
    dec_lens[:decodes] = torch.tensor(ctx, dtype=torch.int32)
    qsl = [decodes]
    for _, n in chunks:
        qsl.append(qsl[-1] + n)
    return dict(
        q=q.to(dev), kv_cache=cache.to(dev), decode_qsl=torch.arange(bucket + 1, dtype=torch.int32).to(dev),
        decode_seq_lens=dec_lens.to(dev), decode_block_tables=dec_tables.to(dev),
        chunk_qsl=torch.tensor(qsl, dtype=torch.int32).to(dev),
        chunk_seq_lens=torch.tensor([c + n for c, n in chunks], dtype=torch.int32).to(dev),
        chunk_block_tables=tables[decodes:].contiguous().to(dev), max_chunk_len=t, max_seq_len=max(lens),
        scale=D ** -0.5, rows=qsl[-1], decodes=decodes,
        kv_bytes=sum(lens) * 2 * Hkv * D * cache.element_size())  # every sequence's K and V read once


def runner(form: str, s: dict, out: torch.Tensor):
    """A callable running one layer's attention of the step in `form` into `out`."""
    d = s["decodes"]
    if form == "fork":  # the chunks' prefill launch on a side stream beside the decode launch (longest first)
        side = torch.cuda.Stream()
        lens = s["decode_seq_lens"][:d]
        order = torch.argsort(-lens, stable=True).to(torch.int32)

        def fork():
            main = torch.cuda.current_stream()
            side.wait_stream(main)
            with torch.cuda.stream(side):
                kernels.attention(s["q"], s["kv_cache"], s["chunk_qsl"], s["chunk_seq_lens"], s["chunk_block_tables"],
                                  s["max_chunk_len"], s["max_seq_len"], s["scale"], out=out)
            kernels.attention(s["q"], s["kv_cache"], s["decode_qsl"][: d + 1], lens, s["decode_block_tables"][:d], 1,
                              s["max_seq_len"], s["scale"], out=out, decode_order=order)
            main.wait_stream(side)
        return fork
    if form in ("decode_only", "decode_lpt"):
        lens = s["decode_seq_lens"][:d]
        order = torch.argsort(-lens, stable=True).to(torch.int32) if form == "decode_lpt" else None
        return lambda: kernels.attention(s["q"], s["kv_cache"], s["decode_qsl"][: d + 1], lens,
                                         s["decode_block_tables"][:d], 1, s["max_seq_len"], s["scale"], out=out,
                                         decode_order=order)
    if form == "two":
        def two():
            kernels.attention(s["q"], s["kv_cache"], s["decode_qsl"][: d + 1], s["decode_seq_lens"][:d],
                              s["decode_block_tables"][:d], 1, s["max_seq_len"], s["scale"], out=out)
            kernels.attention(s["q"], s["kv_cache"], s["chunk_qsl"], s["chunk_seq_lens"], s["chunk_block_tables"],
                              s["max_chunk_len"], s["max_seq_len"], s["scale"], out=out)
        return two
    order = None
    if form == "lpt":  # the decode sequences longest first (TACHYON_MIXED_ORDER=lpt's order)
        order = torch.argsort(-s["decode_seq_lens"], stable=True).to(torch.int32)
    return lambda: kernels.mixed_attention(
        s["q"], s["kv_cache"], s["decode_qsl"], s["decode_seq_lens"], s["decode_block_tables"], s["chunk_qsl"],
        s["chunk_seq_lens"], s["chunk_block_tables"], s["max_chunk_len"], s["max_seq_len"], s["scale"], out=out,
        decode_order=order)


def measure(form: str, s: dict, ref: torch.Tensor, rows: int) -> dict:
    """One form timed (time_graph) with its first `rows` output rows against `ref`'s; a form Triton cannot build
    (shared memory) is a result, not a crash."""
    out = torch.zeros_like(s["q"])
    try:
        us = time_graph(runner(form, s, out))
        return dict(us=round(us, 2), max_abs_diff=(out[:rows].float() - ref[:rows].float()).abs().max().item())
    except Exception as e:  # noqa: BLE001 - reported in the results
        return dict(error=f"{type(e).__name__}: {str(e)[:200]}")


def time_graph(fn, layers: int = 28, reps: int = 60) -> float:
    """µs per call: fn captured `layers` times in one CUDA graph, replayed `reps` times; median of 3 such graphs
    (prefill_attn_sweep.time_call)."""
    return sorted(time_call(fn, layers, reps) for _ in range(3))[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="out")
    ap.add_argument("--tiles", default="128:64:8:2,128:64:4:2,128:32:4:2,64:32:4:2,32:64:4:2,16:64:4:2")
    ap.add_argument("--steps", default="146/160:70@420+83@0/192,200/224:40@600+48@0/64,96/96:150@300+120@0/320",
                    help="decodes/bucket:new@cached+new@cached/chunk_bucket, comma-separated")
    ap.add_argument("--ctx", default="200:1600", help="decode contexts, uniform lo:hi")
    ap.add_argument("--decode-tiles", default="",
                    help="decode key tiles (BLOCK_N, comma-separated): each adds decode_lpt, lpt and fork forms "
                         "with the decode tile forced (attention_config.DECODE_CONFIG), lpt with each --tiles")
    ap.add_argument("--kv-fp8", action="store_true", help="an e4m3 cache, and the --widens forms")
    ap.add_argument("--widens", default="cvt,cvt:asm", help="TACHYON_KV8_WIDEN modes for --kv-fp8, comma-separated")
    args = ap.parse_args()
    lo, hi = (int(v) for v in args.ctx.split(":"))
    results = []
    for spec in args.steps.split(","):
        head, rest = spec.split(":")
        decodes, bucket = (int(v) for v in head.split("/"))
        chunk_spec, chunk_bucket = rest.rsplit("/", 1)
        chunks = [(int(p.split("@")[1]), int(p.split("@")[0])) for p in chunk_spec.split("+")]
        s = build(decodes, bucket, chunks, int(chunk_bucket), lo, hi, kv_fp8=args.kv_fp8)
        ref = torch.zeros_like(s["q"])
        os.environ.pop("TACHYON_MIXED_CHUNK_TILE", None)
        runner("mixed", s, ref)()
        rows = s["rows"]
        # the floor: the step's KV bytes at the H200's 4.25 TB/s copy ceiling (BENCHMARKS.md)
        row = dict(step=spec, kv_floor_us=round(s["kv_bytes"] / 4.25e12 * 1e6, 2), forms={})
        forms = [("decode_only", ""), ("decode_lpt", ""), ("two", ""), ("default", ""), ("lpt", "")]
        for form, tile in forms + [("tile", t) for t in args.tiles.split(",") if t]:
            if tile:
                os.environ["TACHYON_MIXED_CHUNK_TILE"] = tile
            else:
                os.environ.pop("TACHYON_MIXED_CHUNK_TILE", None)
            row["forms"][tile or form] = measure("mixed" if form in ("default", "tile") else form, s, ref,
                                                 decodes if form.startswith("decode_") else rows)
            print(spec, tile or form, row["forms"][tile or form], flush=True)
        os.environ.pop("TACHYON_MIXED_CHUNK_TILE", None)
        for mode in args.widens.split(",") if args.kv_fp8 else []:
            os.environ["TACHYON_KV8_WIDEN"] = mode
            for form in ("decode_lpt", "lpt"):
                row["forms"][f"{form}@{mode}"] = measure(form, s, ref, decodes if form == "decode_lpt" else rows)
                print(spec, f"{form}@{mode}", row["forms"][f"{form}@{mode}"], flush=True)
            os.environ.pop("TACHYON_KV8_WIDEN")
        for bn in [int(v) for v in args.decode_tiles.split(",") if v]:
            shipped = dict(attention_config.DECODE_CONFIG["bf16"])
            attention_config.DECODE_CONFIG["bf16"] = dict(shipped, BLOCK_N=bn)
            chunk_tiles = [""] + [t for t in args.tiles.split(",") if t]
            variants = [("decode_lpt", ""), ("fork", "")] + [("lpt", t) for t in chunk_tiles]
            for form, tile in variants:
                if tile:
                    os.environ["TACHYON_MIXED_CHUNK_TILE"] = tile
                if form == "fork":  # the chunk launch takes the mixed kernel's chunk tile
                    os.environ["TACHYON_PREFILL_TILE"] = "{BLOCK_M}:{BLOCK_N}:{num_warps}:{num_stages}".format(
                        **attention_config.mixed_chunk_config("bf16"))
                name = f"{form}@{bn}" + (f"/{tile}" if tile else "")
                row["forms"][name] = measure(form, s, ref, decodes if form.startswith("decode_") else rows)
                print(spec, name, row["forms"][name], flush=True)
                os.environ.pop("TACHYON_MIXED_CHUNK_TILE", None)
                os.environ.pop("TACHYON_PREFILL_TILE", None)
            attention_config.DECODE_CONFIG["bf16"] = shipped
        results.append(row)
    res = dict(results=results, gpu=torch.cuda.get_device_name(), torch=torch.__version__, kv_fp8=args.kv_fp8,
               git=os.environ.get("TACHYON_GIT_SHA"))
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "mixed_attn_tiles.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
