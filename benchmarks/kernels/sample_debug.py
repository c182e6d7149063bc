"""Diagnose the sampler's direct path on the GPU at test-sized bins (tests/test_kernels_sampling_kept.py's
test_sampling_paths_agree, first configuration): runs the four kernels as sample_triton does and, per
row, compares the histogram kernel's bin counts and the candidate slots the select kernel filled with a
torch recount from the same (m, 1/w). Prints one line per row and any mismatch.

Usage (GPU machine, repo root): python3 benchmarks/kernels/sample_debug.py
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def main() -> None:
    s = importlib.import_module("tachyon.kernels.sampling")
    from tachyon.kernels._triton import next_pow2, pdl_args, sm_count

    s.MAX_CHUNKS, s.CANDIDATES, s.STREAM_BLOCK, s.HIST_BINS = 4, 4096, 128, 32
    gen = torch.Generator().manual_seed(12)
    V, per = 500, 3
    cases = [(1.0, 0, 0.9, 0.0), (0.8, 40, 0.9, 0.0), (1.0, 300, 0.95, 0.05), (1.0, 200, 1.0, 0.0)]
    scales = [0.05, 0.5, 1.0, 0.3]
    base = [torch.randn(V, generator=gen) * sc for sc in scales]
    logits = torch.stack([x for x in base for _ in range(per)]).to("cuda" if torch.cuda.is_available() else "cpu")
    allc = [c for c in cases for _ in range(per)]
    B = len(allc)
    dev = logits.device
    temp = torch.tensor([c[0] for c in allc], device=dev)
    topk = torch.tensor([c[1] for c in allc], dtype=torch.int32, device=dev)
    topp = torch.tensor([c[2] for c in allc], device=dev)
    minp = torch.tensor([c[3] for c in allc], device=dev)
    seeds = torch.arange(40, 40 + B, dtype=torch.int64, device=dev)
    steps = torch.zeros(B, dtype=torch.int64, device=dev)
    NB, cap, BLOCK = 32, 4096, 128
    nchunk = max(1, min(cdiv(V, BLOCK), cdiv(4 * sm_count(dev), B), 4))
    chunk = cdiv(cdiv(V, nchunk), BLOCK) * BLOCK
    nchunk = cdiv(V, chunk)
    f32 = torch.full((B * (3 * nchunk + 8) + B * cap,), float("nan"), device=dev)
    stat, part_s = f32[: 2 * B * nchunk], f32[2 * B * nchunk: 3 * B * nchunk]
    rowf, cand_s = f32[3 * B * nchunk: 3 * B * nchunk + 8 * B], f32[3 * B * nchunk + 8 * B:]
    sizes = [B * nchunk, B * nchunk * NB, B * NB, 2 * B * NB, 2 * B, 8 * B, B * cap]
    part_i, hist, rowh, hist2, cnt, rowi, cand_i = torch.full((sum(sizes),), -99, dtype=torch.int32,
                                                              device=dev).split(sizes)
    rowacc = torch.zeros(4 * B, dtype=torch.int64, device=dev)
    out = torch.full((B,), -5, dtype=torch.int64, device=dev)
    key_thr = torch.zeros(B, dtype=torch.int32, device=dev)
    s_min = torch.zeros(B, device=dev)
    rows = (temp, topk, topp, minp)
    opts = dict(GREEDY_EPS=s.GREEDY_EPS, BLOCK=BLOCK, enable_fp_fusion=False, **pdl_args(dev))
    cpad = next_pow2(4)
    s._stats_kernel[(B, nchunk)](logits, V, *rows, seeds, steps, part_s, part_i, stat, rowh, rowacc, hist2, cnt, V,
                                 chunk, nchunk, NB=NB, num_warps=4, **opts)
    s._hist_kernel[(B, nchunk)](logits, V, *rows, stat, rowf, rowh, rowacc, hist, V, chunk, nchunk, CPAD=cpad,
                                NB=NB, num_warps=4, **opts)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    hist_after = hist.clone()
    s._select_kernel[(B, nchunk)](logits, V, *rows, seeds, steps, part_s, part_i, rowf, rowi, rowh, rowacc, hist,
                                  hist2, cnt, cand_s, cand_i, V, chunk, nchunk, cap, NB=NB, num_warps=4, **opts)
    s._finish_kernel[(B,)](logits, V, *rows, seeds, steps, part_s, part_i, rowf, rowi, rowacc, hist2, cand_s, cand_i,
                           out, key_thr, s_min, V, nchunk, cap, CPAD=cpad, NB=NB, BLOCK_C=1024,
                           WAYS=s.SEARCH_WAYS, num_warps=8, **opts)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    print(f"B={B} nchunk={nchunk} chunk={chunk} pdl={opts.get('PDL')}")
    rf, ri = rowf.view(B, 8).cpu(), rowi.view(B, 8).cpu()
    H = hist_after.view(B, nchunk, NB).cpu()
    for r in range(B):
        sc = (logits[r].double().cpu() / allc[r][0]).float()
        m, inv_w = rf[r, 0].item(), rf[r, 1].item()
        q = (m - sc) * inv_w
        b = q.clamp(0, NB - 1).to(torch.int32)
        ref = torch.stack([torch.bincount(b[c * chunk: min(V, (c + 1) * chunk)], minlength=NB)
                           for c in range(nchunk)])
        mode, a1, a2, bk, nP, nK = ri[r, :6].tolist()
        ci = cand_i.view(B, cap)[r, : max(0, nP + nK)].cpu()
        unfilled = int((ci == -99).sum())
        bad = int(((ci < 0) | (ci >= V)).sum())
        hist_ok = torch.equal(H[r].to(torch.int64), ref)
        print(f"row {r} case {allc[r]} token {out[r].item()} mode {mode} a1 {a1} a2 {a2} bk {bk} nP {nP} nK {nK} "
              f"cnt {cnt.view(B, 2)[r].tolist()} unfilled {unfilled} bad {bad} hist_ok {hist_ok}")
        if not hist_ok:
            print("   hist kernel:", H[r].tolist())
            print("   torch      :", ref.tolist())


if __name__ == "__main__":
    main()
