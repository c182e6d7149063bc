"""Token sampling: temperature, top-k, top-p, min-p, per-row seeds; batch-independent.

Contract: logits [B, V] (any float dtype; read as fp32), temperature f32 [B], top_k int32 [B]
(<= 0 or >= V: off), top_p f32 [B] (>= 1: off), min_p f32 [B] (<= 0: off), seeds int64 [B],
steps int64 [B] -> int64 [B].
Rows with temperature < 1e-5 or top_k == 1 take the argmax of the raw logits (first index on ties).
Other rows draw from softmax(logits * (1 / T)) restricted, in this order (HF's), to the top-k tokens,
then to the smallest prefix whose mass (renormalised over the top-k) reaches top_p, then to tokens
with p >= min_p * p_max. A row's draw depends only on its logits, parameters, seed and step.
The reference and the Triton kernels sample the same distribution with different random streams.

Triton path (`sample_triton`). s = x * (1 / T); key(s) is its order-preserving int32 image. The kept
set of a row is {key >= t} & {s >= s_min}: t is the larger of the top-k threshold (the largest t with
at least k keys >= t) and the top-p one (the largest t whose keys >= t hold >= top_p of the top-k
mass), so tokens tied with the last kept one are kept too; s_min = m + log(min_p), m = max s.
Four kernels, a fixed sequence for a given (B, V): no host sync, no data-dependent shape or grid
(CUDA-graph capturable). The first three run one program per (row, vocabulary chunk), B * C programs
with C = min(V / 1024, PROGRAMS_PER_SM * SMs / B) (every program reads its chunk once); the last one per row.
 1. stats:  greedy rows -> the chunk's argmax; unfiltered rows -> the chunk's Gumbel race winner (their
            work ends here); filtered rows -> the chunk's max and min finite s.
 2. hist:   m, bin width w = (m - min s) / NB, s_min; top-k / top-p rows: the chunk's count histogram of
            q = (m - s) / w over NB = 512 bins (tl.histogram) and its mass sum(exp(s - m)).
 3. select: each program reads the row's histogram and brackets the thresholds: top-k's bin is exact
            (counts); the bins that can hold top-p's are bracketed by per-bin mass bounds
            count * exp(-q w) (cumulated from the top, and from the total mass at the bottom).
            DIRECT (the usual case; e.g. a few thousand tokens for flat top_p=0.9 rows of 152k): the
            programs compact their bracket tokens into the row's CAP = 4096 candidates. REFINE: they
            histogram them again over NB sub-bins. Both: exact masses above / inside the brackets,
            and the race among the tokens above both brackets (kept whatever the exact t).
 4. finish: REFINE rows narrow the brackets with the sub-bins, then one pass over the row by this
            program alone compacts the sub-bracket tokens (rare: large top-k combined with top-p);
            if those still exceed CAP (massive ties), FALLBACK: this program runs the exact
            (WAYS+1)-ary key search over the whole row (slow). Then the exact thresholds on the
            candidates: the same key search, by count (top-k) and by mass plus the mass above the
            bracket (top-p); the candidates race with t; the best of all partial races is the token.
Rejection fast path (FAST_RACES = R > 0, rows with top-p and top-k off, unless `thresholds` are asked
for): two more chunked kernels between stats and hist. races: R more Gumbel races over the row in streams
1..R of (seed, step) (the main race uses stream 0); fastmass: the row's fixed-point total and the mass
strictly above each race winner's key. A winner lies in the kept set iff that mass is below the top-p
target (the same fixed-point target the exact search uses; ties with it are kept, as there) and its
s >= s_min; hist's chunk 0 records the first such winner in fast_tok and every later kernel skips a row
that has one. Each race's winner is an exact draw from softmax(s), so the first winner inside the kept
set is a draw from the filtered distribution (rejection sampling); a row where all R miss (probability
<= (1 - top_p)^R) takes the exact search below, with stream 0: the mixture is still that distribution.
It replaces the histogram, bracket and candidate passes (the costly ones) for almost every top-p row.
A batch whose rows are all greedy or unfiltered (`unfiltered=True`, the caller's guarantee) launches stats
and finish only: the other kernels would skip every row. Otherwise: 4 launches (6 with the fast path) and
3 chunked passes over the logits per step whatever the size of the kept set (the row's max and min, its
histogram, then the compaction and race), instead of one program per row walking the row ~14 times when the
kept set is large. Why brackets and not an exact radix select:
Triton has no shared-memory atomics, so a per-bin *mass* histogram costs ~NB operations per token
(one-hot sums), while a count histogram (tl.histogram) costs a few; count-derived mass bounds are
tight enough to leave ~0.1-1% of a flat row (and a handful of tokens of a peaked one) to the exact
stage, which then runs on a few thousand candidates at most. The compaction "fast path" is thus the
only path: small kept sets just give small brackets.
Determinism: masses that cross programs are int64 fixed point (exp(s - m) * 2^40) and per-row totals
are integer atomic adds, exact and order-independent; candidate searches use the same integer sums
and the race is an argmax with ties to the lowest index, so the slot order of the candidates does not
matter. Nothing depends on C, hence on B. Bounds carry a relative 1e-4 and an absolute 2^-39 per token
slack over fp32 exp / rounding, so the brackets always hold the thresholds that the exact stage finds.
Race: Gumbel-max with philox keyed by (seed, step), counter (vocab index // 4); one call yields the
uniforms of 4 consecutive indices. The fast path's extra races compute their noise with the SFU's
lg2.approx (`_gumbel_fast`, within 2e-6 of the exact noise) instead of libdevice's logf, twice per token
and race: they pick candidates for the rejection test only, so their scores never meet the main race's.
"""

import numpy as np
import torch

from tachyon.kernels._triton import next_pow2, pdl_args, require_triton, sm_count, triton
from tachyon.kernels.sampling_finish import _finish_kernel
from tachyon.kernels.sampling_kernels import (
    _fastmass_kernel,
    _hist_kernel,
    _races_kernel,
    _select_kernel,
    _stats_kernel,
)

GREEDY_EPS = 1e-5
CANDIDATES = 4096  # per-row candidate buffer of the Triton top-k / top-p search
SEARCH_WAYS = 8  # thresholds tested per pass of the exact search
# bins of each histogram level: fewer bins cost fewer histogram and cumsum operations per token but
# widen the brackets. H200, synthetic logits (sample_timing.py): B=8 top-p 0.9 104 / 70 / 66-72 us and
# B=256 1.9 / 1.0 / 0.92 ms at 1024 / 512 / 256 bins. On the Qwen2.5-7B dummy model's own logits (seed8,
# B=8, T 0.7, top-p 0.9) the step took 4.33 / 4.31 / 4.57 ms: at 256 bins its brackets overflow the
# candidates and rows take the slower refine pass. 512 is the best of both.
HIST_BINS = 512
# rejection fast path for top-p rows without top-k: R extra races (a power of two); each winner lies in the
# kept set with probability >= top_p, so the exact search runs for a row with probability <= (1 - top_p)^R
FAST_RACES = 4
# sample_ref: a top-p row sorts only its top REF_TOP_P_PREFIXES[i] tokens, the first of these sizes whose tokens hold
# top_p of its mass, else the whole row (2-core CPU, 49k vocabulary: topk 256 0.10 ms, 1,024 0.58 ms, full sort 3.6)
REF_TOP_P_PREFIXES = (256, 2048)
MAX_CHUNKS = 256  # vocab chunks per row (programs per row of the chunked kernels)
PROGRAMS_PER_SM = 4  # chunked kernels: about this many programs per SM over the batch
STREAM_BLOCK = 1024  # logits per block of the streaming loops (chunks are multiples of it)
_MASK63 = (1 << 63) - 1


def mix_seeds(seeds: torch.Tensor, steps: torch.Tensor) -> torch.Tensor:
    """One non-negative int64 stream id per (seed, step) (LCG-style mix, wrapping int64)."""
    s = seeds.to(torch.int64) * 6364136223846793005 + steps.to(torch.int64) * 1442695040888963407
    return (s + 2685821657736338717) & _MASK63


def row_is_unfiltered(temperature: float, top_k: int, top_p: float, min_p: float, vocab_size: int) -> bool:
    """Host mirror of the kernels' row classes (sampling_device._row_params, on the same fp32 values): True for a
    greedy row or a row drawn from the whole softmax (no top-k, top-p or min-p filter), whose token the stats
    and finish kernels alone give (`sample_triton(..., unfiltered=True)`)."""
    t, p, mp = np.float32(temperature), np.float32(top_p), np.float32(min_p)
    if t < np.float32(GREEDY_EPS) or top_k == 1:
        return True
    return not (1 < top_k < vocab_size) and not p < 1.0 and not mp > 0.0


def sample_ref(
    logits: torch.Tensor,
    temperature: torch.Tensor,
    top_k: torch.Tensor,
    top_p: torch.Tensor,
    min_p: torch.Tensor,
    seeds: torch.Tensor,
    steps: torch.Tensor,
    out: torch.Tensor | None = None,
    unfiltered: bool = False,
) -> torch.Tensor:
    """Plain torch; sorts only rows that use top-p, and of those only the top REF_TOP_P_PREFIXES tokens when they
    hold the kept set (top-k rows use torch.topk). The tokens are copied into
    `out` (int64 [B]) and it is returned, when given. `unfiltered` (a launch hint of the Triton path) changes
    nothing here."""
    tokens = _sample_rows_ref(logits, temperature, top_k, top_p, min_p, seeds, steps)
    return tokens if out is None else out.copy_(tokens)


def _sample_rows_ref(logits, temperature, top_k, top_p, min_p, seeds, steps) -> torch.Tensor:
    B, V = logits.shape
    out = logits.argmax(dim=-1)
    temps, ks, ps, mps = (t.tolist() for t in (temperature, top_k, top_p, min_p))
    inv_t = temperature.float().reciprocal()
    streams = mix_seeds(seeds, steps).tolist()
    for r in range(B):
        T, k, p, mp = temps[r], int(ks[r]), ps[r], mps[r]
        if T < GREEDY_EPS or k == 1:
            continue
        s = logits[r].float() * inv_t[r]
        idx = probs = None
        if 0 < k < V:
            s, idx = s.topk(k)
        elif p < 1.0:
            s, idx, probs = _top_p_prefix(s, p)
        if probs is None:
            probs = torch.softmax(s, dim=-1)
        keep = torch.ones_like(probs, dtype=torch.bool)
        if p < 1.0:  # probs are sorted descending here: keep while the mass above is < top_p
            keep &= (torch.cumsum(probs, 0) - probs) < p
            keep[0] = True  # top_p <= 0 keeps the top token
        if mp > 0.0:
            keep &= s >= s.max() + torch.log(torch.tensor(mp, dtype=torch.float32))
        probs = torch.where(keep, probs, 0.0)
        gen = torch.Generator(device=logits.device).manual_seed(streams[r])
        choice = torch.multinomial(probs, 1, generator=gen)[0]
        out[r] = choice if idx is None else idx[choice]
    return out


def _top_p_prefix(s: torch.Tensor, p: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(scores, indices, probabilities) of a row's tokens in descending order, enough of them to hold its top-p
    set: the top n (the first of REF_TOP_P_PREFIXES that is) whose cumulative mass (the sums the caller's keep rule
    uses) reaches p, for then the mass above every later token is >= p and none is kept; else the whole sorted row.
    The probabilities are over the whole row."""
    probs = torch.softmax(s, dim=-1)
    for n in REF_TOP_P_PREFIXES:
        if n >= s.shape[0]:
            break
        top, idx = probs.topk(n)
        if float(torch.cumsum(top, 0)[-1]) >= p:
            return s[idx], idx, top
    probs, idx = probs.sort(descending=True)
    return s[idx], idx, probs


def _aligned_split(dtype: torch.dtype, sizes: list[int], device: torch.device) -> list[torch.Tensor]:
    """One allocation cut into segments of the given sizes, each starting at a 16-byte boundary."""
    per = 16 // torch.empty(0, dtype=dtype).element_size()
    padded = [-(-n // per) * per for n in sizes]
    buf = torch.empty(sum(padded), dtype=dtype, device=device)
    return [seg[:n] for seg, n in zip(buf.split(padded), sizes)]


def sample_triton(
    logits: torch.Tensor,
    temperature: torch.Tensor,
    top_k: torch.Tensor,
    top_p: torch.Tensor,
    min_p: torch.Tensor,
    seeds: torch.Tensor,
    steps: torch.Tensor,
    thresholds: tuple[torch.Tensor, torch.Tensor] | None = None,
    out: torch.Tensor | None = None,
    unfiltered: bool = False,
) -> torch.Tensor:
    """Triton: stats, histogram, bracket / compact and finish kernels (see the module docstring).
    `thresholds` (int32 [B], fp32 [B]), if given, receive each filtered row's key threshold and min-p
    logit bound, which define its kept set (tests read them); the rejection fast path is then off, so
    that every row's kept set is computed. `out` (int64 [B], contiguous), if given, receives the tokens
    (the finish kernel writes it directly) and is returned. `unfiltered`: the caller guarantees that every
    row is greedy or unfiltered (`row_is_unfiltered`); only the stats and finish kernels are launched (the
    others would skip every such row), the same tokens two to four launches sooner."""
    require_triton()
    B, V = logits.shape
    dev = logits.device
    if out is None:
        out = torch.empty(B, dtype=torch.int64, device=dev)
    assert out.shape == (B,) and out.dtype == torch.int64 and out.is_contiguous()
    if B == 0:
        return out
    assert logits.stride(-1) == 1
    temperature, top_k, top_p, min_p = temperature.float(), top_k.to(torch.int32), top_p.float(), min_p.float()
    seeds, steps = seeds.to(torch.int64), steps.to(torch.int64)
    thresholds_given = thresholds is not None
    if thresholds is None:
        thresholds = (torch.empty(B, dtype=torch.int32, device=dev), torch.empty(B, dtype=torch.float32, device=dev))
    key_thr, s_min = thresholds
    NB, cap = HIST_BINS, CANDIDATES
    BLOCK = min(STREAM_BLOCK, max(16, next_pow2(V)))
    nchunk = max(1, min(triton.cdiv(V, BLOCK), triton.cdiv(PROGRAMS_PER_SM * sm_count(dev), B), MAX_CHUNKS))
    chunk = triton.cdiv(triton.cdiv(V, nchunk), BLOCK) * BLOCK
    nchunk = triton.cdiv(V, chunk)
    # scratch: every segment starts 16-byte aligned whatever B and nchunk, so Triton's pointer-alignment
    # specialisation gives one compile for all batch sizes (an odd B * nchunk once compiled a second
    # select / finish variant in the middle of a run: a 3.5 s stall)
    stat, part_s, rowf, cand_s = _aligned_split(torch.float32, [2 * B * nchunk, B * nchunk, 8 * B, B * cap], dev)
    part_i, hist, rowh, hist2, cnt, rowi, cand_i = _aligned_split(
        torch.int32, [B * nchunk, B * nchunk * NB, B * NB, 2 * B * NB, 2 * B, 8 * B, B * cap], dev)
    fast = FAST_RACES > 0 and not thresholds_given and not unfiltered
    R = FAST_RACES if fast else 1
    assert R & (R - 1) == 0, "FAST_RACES must be a power of two"
    fast_s, fastw_s = _aligned_split(torch.float32, [B * R * nchunk, B * R], dev)
    fast_i, fastw_i, fast_tok = _aligned_split(torch.int32, [B * R * nchunk, B * R, B], dev)
    rowacc, fastacc = _aligned_split(torch.int64, [4 * B, B * (R + 1)], dev)
    rows = (temperature, top_k, top_p, min_p)
    # fp fusion off: s, q get the same bits in every kernel
    cpad = next_pow2(MAX_CHUNKS)  # not next_pow2(nchunk): one compile serves every batch size
    opts = dict(GREEDY_EPS=GREEDY_EPS, BLOCK=BLOCK, enable_fp_fusion=False, **pdl_args(dev))
    _stats_kernel[(B, nchunk)](logits, logits.stride(0), *rows, seeds, steps, part_s, part_i, stat, rowh, rowacc,
                               hist2, cnt, fastacc, fast_tok, V, chunk, nchunk, NB=NB, R=R, num_warps=4, **opts)
    if fast:
        _races_kernel[(B, nchunk)](logits, logits.stride(0), *rows, seeds, steps, fast_s, fast_i, V, chunk, nchunk,
                                   R=R, num_warps=8, FAST_LOG=dev.type != "cpu", **opts)
        _fastmass_kernel[(B, nchunk)](logits, logits.stride(0), *rows, stat, fast_s, fast_i, fastw_s, fastw_i, fastacc,
                                      V, chunk, nchunk, CPAD=cpad, R=R, num_warps=8, **opts)
    if not unfiltered:
        _hist_kernel[(B, nchunk)](logits, logits.stride(0), *rows, stat, rowf, rowh, rowacc, hist, fastacc, fastw_s,
                                  fastw_i, fast_tok, V, chunk, nchunk, CPAD=cpad, NB=NB, FAST=fast, R=R, num_warps=4,
                                  **opts)
        _select_kernel[(B, nchunk)](logits, logits.stride(0), *rows, seeds, steps, part_s, part_i, rowf, rowi, rowh,
                                    rowacc, hist, hist2, cnt, cand_s, cand_i, fast_tok, V, chunk, nchunk, cap, NB=NB,
                                    num_warps=4, **opts)
    _finish_kernel[(B,)](logits, logits.stride(0), *rows, seeds, steps, part_s, part_i, rowf, rowi, rowacc, hist2,
                         cand_s, cand_i, fast_tok, out, key_thr, s_min, V, nchunk, cap, CPAD=cpad, NB=NB,
                         BLOCK_C=max(16, min(1024, next_pow2(cap))), WAYS=SEARCH_WAYS, num_warps=8, **opts)
    return out
