"""Joules a decode attention spends beyond the bytes it reads: the engine's decode kernel against a kernel that only
streams the same KV bytes, at the board's power cap.

Why: about a fifth of a flat 7B nano256 step's joules are the attention's (docs/performance.md, "What bounds
Qwen2.5-7B nano256"), and at the cap a run's time follows its joules. If the engine's kernel spends much more per
KV byte than a bare read of those bytes, a leaner kernel would buy throughput there; if not, the attention's joules
are its bytes' and no kernel change moves them.

Three forms, each a CUDA graph of 28 calls (a step's layers) held back to back for --seconds (energy_hold.hold: ms
and NVML joules per call, median power and SM clock), alternating over --rounds:

  engine    kernels.attention's decode launch, longest first (as the engine's decode-only steps)
  stream    this script's kernel: the same grid, order and gathered K / V tile loads through the block table, and
            only a sum of the loaded values (checked against a torch sum of the same keys and values)
  contig    torch.sum over a contiguous bf16 buffer of the same byte count (the plainest full-bandwidth read)

on decode batches shaped like a flat 7B step's (contexts uniform in [200, 1600]) and on uniform long contexts.
Reported per form: ms and J per call, W, MHz, GB/s and pJ per KV byte.

Usage (GPU machine, repo root): python3 benchmarks/gpu/attn_energy.py --out DIR
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from benchmarks.gpu.decode_loop_variants import _tile_offsets, batch  # noqa: E402
from tachyon import kernels  # noqa: E402
from tachyon.kernels._triton import tl, triton  # noqa: E402

LAYERS = 28


@triton.jit
def _kv_stream_kernel(
    cache_ptr, out_ptr, seq_lens_ptr, bt_ptr, order_ptr,
    stride_c_kv, stride_c_blk, stride_c_tok, stride_c_h, stride_bt,
    D: tl.constexpr, PAGE: tl.constexpr, BLOCK_N: tl.constexpr,
):
    """Program (KV head, i): sequence order[i]'s keys and values of KV head hk, loaded tile by tile as the decode
    kernel gathers them; writes their fp32 sum over tokens, [D], to out[(b * Hkv + hk) * D:]."""
    hk = tl.program_id(0)
    b = tl.load(order_ptr + tl.program_id(1))
    S = tl.load(seq_lens_ptr + b)
    d = tl.arange(0, D)
    acc = tl.zeros([D], tl.float32)
    bt_row = bt_ptr + b * stride_bt
    for n0 in range(0, S, BLOCK_N):
        n = n0 + tl.arange(0, BLOCK_N)
        off = _tile_offsets(bt_row, n, S, hk, stride_c_blk, stride_c_tok, stride_c_h, PAGE)[:, None] + d[None, :]
        k = tl.load(cache_ptr + off, mask=(n < S)[:, None], other=0.0)
        v = tl.load(cache_ptr + stride_c_kv + off, mask=(n < S)[:, None], other=0.0)
        acc += tl.sum(k.to(tl.float32) + v.to(tl.float32), 0)
    tl.store(out_ptr + (b * tl.num_programs(0) + hk) * D + d, acc)


def kv_stream(s: dict, out: torch.Tensor, block_n: int = 128) -> None:
    """One launch of _kv_stream_kernel over batch `s` (decode_loop_variants.batch); out fp32 [B, Hkv, D]."""
    cache, tables = s["cache"], s["tables"]
    Hkv, page, D = cache.shape[3], cache.shape[2], cache.shape[4]
    _kv_stream_kernel[(Hkv, s["seq_lens"].shape[0])](
        cache, out, s["seq_lens"], tables, s["order"], cache.stride(0), cache.stride(1), cache.stride(2),
        cache.stride(3), tables.stride(0), D=D, PAGE=page, BLOCK_N=block_n, num_warps=4, num_stages=2)


def kv_stream_ref(s: dict) -> torch.Tensor:
    """Torch: each (sequence, KV head)'s fp32 sum of its keys plus values over its tokens, [B, Hkv, D]."""
    cache, tables, lens = s["cache"], s["tables"], s["seq_lens"].tolist()
    page = cache.shape[2]
    rows = []
    for b, n in enumerate(lens):
        blocks = tables[b, : (n + page - 1) // page].long()
        kv = cache[:, blocks].float().flatten(1, 2)[:, :n]  # [2, n, Hkv, D]
        rows.append(kv.sum(dim=(0, 1)))
    return torch.stack(rows)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="out")
    ap.add_argument("--seconds", type=float, default=1.5)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # energy_hold and clock_sampler: script-folder imports
    from clock_sampler import energy_reader
    from energy_hold import hold
    from step_energy import capture

    def graphed(fn):
        """fn called LAYERS times (a step's layers), captured as one CUDA graph: its replay."""
        return capture(lambda: [fn() for _ in range(LAYERS)]).replay

    energy = energy_reader()
    rng = random.Random(0)
    cases = {f"{n} x U[200,1600]": [rng.randint(200, 1600) for _ in range(n)] for n in (146, 256)}
    cases["64 x 4096"] = [4096] * 64
    results = []
    for name, lens in cases.items():
        s = batch(lens)
        out = torch.zeros_like(s["q"])
        sums = torch.zeros(len(lens), s["cache"].shape[3], s["cache"].shape[4], device="cuda")
        kv_stream(s, sums)
        torch.cuda.synchronize()
        ref = kv_stream_ref(s)
        err = ((sums - ref).abs() / (ref.abs() + 1.0)).max().item()
        assert err < 1e-3, f"{name}: the stream kernel's sums differ from torch's (max rel err {err:.2e})"
        contig = torch.empty(s["kv_bytes"] // 2 // 8192, 8192, dtype=torch.bfloat16, device="cuda").normal_()
        csum = torch.empty(8192, dtype=torch.bfloat16, device="cuda")
        forms = {
            "engine": graphed(lambda s=s, out=out: kernels.attention(
                s["q"], s["cache"], s["qsl"], s["seq_lens"], s["tables"], 1, s["max_len"], s["scale"], out=out,
                decode_order=s["order"])),
            "stream": graphed(lambda s=s, sums=sums: kv_stream(s, sums)),
            "contig": graphed(lambda contig=contig, csum=csum: torch.sum(contig, dim=0, out=csum)),
        }
        runs: dict[str, list[dict]] = {k: [] for k in forms}
        for _ in range(args.rounds):
            for key, fn in forms.items():
                runs[key].append(hold(fn, args.seconds, energy))
        row = dict(case=name, kv_bytes_per_layer=s["kv_bytes"], stream_max_rel_err=err,
                   floor_ms_per_call=round(LAYERS * s["kv_bytes"] / 4.25e12 * 1e3, 4), forms={})
        for key, rs in runs.items():
            ms = statistics.median(r["ms_per_call"] for r in rs)
            j = [r["j_per_call"] for r in rs if r["j_per_call"] is not None]
            jm = statistics.median(j) if j else None
            row["forms"][key] = dict(
                ms_per_call=round(ms, 4), j_per_call=round(jm, 4) if jm else None,
                gb_s=round(LAYERS * s["kv_bytes"] / ms / 1e6, 1),
                pj_per_byte=round(jm / (LAYERS * s["kv_bytes"]) * 1e12, 2) if jm else None,
                rounds=rs)
            print(name, key, {k: v for k, v in row["forms"][key].items() if k != "rounds"},
                  "W", [r.get("power_w_median") for r in rs], "MHz", [r.get("sm_mhz_median") for r in rs], flush=True)
        results.append(row)
        del s, contig, forms
        torch.cuda.empty_cache()
    res = dict(results=results, gpu=torch.cuda.get_device_name(), torch=torch.__version__,
               git=os.environ.get("TACHYON_GIT_SHA"))
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "attn_energy.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
