"""Token sampling: temperature, top-k, top-p, min-p, per-row seeds; batch-independent.

Contract: logits [B, V] (any float dtype; read as fp32), temperature f32 [B], top_k int32 [B]
(<= 0 or >= V: off), top_p f32 [B] (>= 1: off), min_p f32 [B] (<= 0: off), seeds int64 [B],
steps int64 [B] -> int64 [B].
Rows with temperature < 1e-5 or top_k == 1 take the argmax of the raw logits (first index on ties).
Other rows draw from softmax(logits * (1 / T)) restricted, in this order (HF's), to the top-k tokens,
then to the smallest prefix whose mass (renormalised over the top-k) reaches top_p, then to tokens
with p >= min_p * p_max. A row's draw depends only on its logits, parameters, seed and step.
The reference and the Triton kernel sample the same distribution with different random streams.
"""

import torch

from tachyon.kernels._triton import next_pow2, require_triton, sm_count, tl, triton

GREEDY_EPS = 1e-5
CANDIDATES = 4096  # per-row scratch for the Triton top-k / top-p search
SEARCH_WAYS = 4  # thresholds tested per pass of that search
_MASK63 = (1 << 63) - 1


def mix_seeds(seeds: torch.Tensor, steps: torch.Tensor) -> torch.Tensor:
    """One non-negative int64 stream id per (seed, step) (LCG-style mix, wrapping int64)."""
    s = seeds.to(torch.int64) * 6364136223846793005 + steps.to(torch.int64) * 1442695040888963407
    return (s + 2685821657736338717) & _MASK63


def sample_ref(
    logits: torch.Tensor,
    temperature: torch.Tensor,
    top_k: torch.Tensor,
    top_p: torch.Tensor,
    min_p: torch.Tensor,
    seeds: torch.Tensor,
    steps: torch.Tensor,
) -> torch.Tensor:
    """Plain torch; sorts only rows that use top-p (top-k rows use torch.topk)."""
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
        idx = None
        if 0 < k < V:
            s, idx = s.topk(k)
        elif p < 1.0:
            s, idx = s.sort(descending=True)
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


@triton.jit
def _row_keys(base, offs, V, inv_t):
    """Scaled logits s = x * (1 / T) of one block, their validity and order-preserving int32 keys
    (INT32_MIN for lanes past V, below every search threshold)."""
    valid = offs < V
    s = tl.load(base + offs, mask=valid, other=0.0).to(tl.float32) * inv_t
    bits = s.to(tl.int32, bitcast=True)
    key = tl.where(bits >= 0, bits, bits ^ 0x7FFFFFFF)
    return s, valid, tl.where(valid, key, -2147483648)


@triton.jit
def _search(base, V, inv_t, m, lo, hi, target, MASS: tl.constexpr, WAYS: tl.constexpr, BLOCK: tl.constexpr):
    """Largest key threshold t in [lo, hi] with stat(key >= t) >= target, where stat is the count
    (MASS False) or the exp(s - m) mass of the row's keys at or above t; requires stat(lo) >= target.
    Each pass over the row tests WAYS thresholds at once (a (WAYS+1)-ary search on the int keys:
    about log_{WAYS+1}(hi - lo) passes; a count search stops early when exactly `target` keys pass)."""
    offs0 = tl.arange(0, BLOCK)
    jj = tl.arange(0, WAYS)
    while lo < hi:
        mids = lo + 1 + ((hi - lo - 1) * (jj + 1)) // WAYS  # increasing, in (lo, hi], last == hi
        stat = tl.zeros([BLOCK, WAYS], tl.float32)
        for start in range(0, V, BLOCK):
            s, valid, key = _row_keys(base, start + offs0, V, inv_t)
            ge = key[:, None] >= mids[None, :]
            if MASS:
                stat += tl.where(ge, tl.exp(s - m)[:, None], 0.0)
            else:
                stat += ge.to(tl.float32)
        stat_j = tl.sum(stat, 0)
        n_true = tl.sum((stat_j >= target).to(tl.int32), 0)  # thresholds passing (a prefix of mids)
        if n_true > 0:
            lo = tl.sum(tl.where(jj == n_true - 1, mids, 0), 0)
            if not MASS:
                if tl.sum(tl.where(jj == n_true - 1, stat_j, 0.0), 0) == target:
                    hi = lo  # exactly k keys at or above: this threshold keeps the top k
        if n_true < WAYS:
            hi = tl.minimum(hi, tl.sum(tl.where(jj == n_true, mids, 0), 0) - 1)
    return lo


@triton.jit
def _find_threshold(base, n, inv_t, m, lo, hi, k, p, z_all, use_k, use_p, WAYS: tl.constexpr, BLOCK: tl.constexpr):
    """Key threshold of the top-k, then top-p set among the n values at base (the whole row, or a
    candidate subset known to contain that set). z_all: the row's total exp(s - m) mass."""
    if use_k:
        lo = _search(base, n, inv_t, m, lo, hi, k.to(tl.float32), False, WAYS, BLOCK)
    if use_p:
        z = z_all
        if use_k:  # top-p renormalises over the top-k set
            offs0 = tl.arange(0, BLOCK)
            zv = tl.zeros([BLOCK], tl.float32)
            for start in range(0, n, BLOCK):
                s, valid, key = _row_keys(base, start + offs0, n, inv_t)
                zv += tl.where(key >= lo, tl.exp(s - m), 0.0)
            z = tl.sum(zv, 0)
        target = tl.maximum(p * z, 1e-30)  # top_p <= 0 keeps the top token
        lo = _search(base, n, inv_t, m, lo, hi, target, True, WAYS, BLOCK)
    return lo


@triton.jit
def _threshold_kernel(
    logits_ptr, stride_l, temp_ptr, inv_t_ptr, topk_ptr, topp_ptr, minp_ptr, key_thr_ptr, s_min_ptr, cand_ptr, V,
    CAP: tl.constexpr, GREEDY_EPS: tl.constexpr, BLOCK: tl.constexpr, BLOCK_S: tl.constexpr,
    WAYS: tl.constexpr, LEVELS: tl.constexpr,
):
    """Per row: the kept set of a filtered row is {key(s) >= key_thr} & {s >= s_min}.
    Passes over the row: max; count and mass above m - 2^(j-1) for j < LEVELS; then, when one of
    those sets holds the top-k (or, without top-k, top-p) set and at most CAP tokens, the search
    runs on those compacted candidates; otherwise on the whole row."""
    row = tl.program_id(0)
    base = logits_ptr + row.to(tl.int64) * stride_l
    T = tl.load(temp_ptr + row)
    k = tl.load(topk_ptr + row)
    p = tl.load(topp_ptr + row)
    mp = tl.load(minp_ptr + row)
    inv_t = tl.load(inv_t_ptr + row)
    use_k = (k > 1) & (k < V)
    use_p = p < 1.0
    t = -2147483648  # keep every key ...
    s_min = -float("inf")  # ... and every logit, unless filtered below
    if (T >= GREEDY_EPS) & (k != 1) & (use_k | use_p | (mp > 0.0)):
        offs0 = tl.arange(0, BLOCK)
        mv = tl.full([BLOCK], float("-inf"), tl.float32)
        kminv = tl.full([BLOCK], 2147483647, tl.int32)
        kmaxv = tl.full([BLOCK], -2147483648, tl.int32)
        for start in range(0, V, BLOCK):
            s, valid, key = _row_keys(base, start + offs0, V, inv_t)
            mv = tl.where(valid, tl.maximum(mv, s), mv)
            kminv = tl.where(valid, tl.minimum(kminv, key), kminv)
            kmaxv = tl.where(valid, tl.maximum(kmaxv, key), kmaxv)
        m = tl.max(mv, 0)
        kmax = tl.max(kmaxv, 0).to(tl.int64)
        lo = tl.min(kminv, 0).to(tl.int64)
        if use_k | use_p:
            offs_s = tl.arange(0, BLOCK_S)
            jl = tl.arange(0, LEVELS)
            deltas = tl.exp2(jl.to(tl.float32) - 1.0)  # 0.5, 1, 2, 4, ...
            cnt = tl.zeros([BLOCK_S, LEVELS], tl.float32)
            mass = tl.zeros([BLOCK_S, LEVELS], tl.float32)
            zacc = tl.zeros([BLOCK_S], tl.float32)
            for start in range(0, V, BLOCK_S):
                s, valid, key = _row_keys(base, start + offs_s, V, inv_t)
                e = tl.where(valid, tl.exp(s - m), 0.0)
                zacc += e
                inside = ((m - s)[:, None] <= deltas[None, :]) & valid[:, None]
                cnt += inside.to(tl.float32)
                mass += tl.where(inside, e[:, None], 0.0)
            cnt_j = tl.sum(cnt, 0)
            mass_j = tl.sum(mass, 0)
            z_all = tl.sum(zacc, 0)
            holds = (use_k & (cnt_j >= k.to(tl.float32))) | (~use_k & (mass_j >= p * z_all))
            ok_j = holds & (cnt_j <= CAP)
            j_star = tl.min(tl.where(ok_j, jl, LEVELS), 0)
            if j_star < LEVELS:
                delta = tl.sum(tl.where(jl == j_star, deltas, 0.0), 0)
                cbase = cand_ptr + row.to(tl.int64) * CAP
                n = 0
                kmin_c = 2147483647
                for start in range(0, V, BLOCK):
                    s, valid, key = _row_keys(base, start + offs0, V, inv_t)
                    sel = valid & ((m - s) <= delta)
                    seli = sel.to(tl.int32)
                    tl.store(cbase + n + tl.cumsum(seli, 0) - 1, s, mask=sel)
                    n += tl.sum(seli, 0)
                    kmin_c = tl.minimum(kmin_c, tl.min(tl.where(sel, key, 2147483647), 0))
                lo = _find_threshold(cbase, n, 1.0, m, kmin_c.to(tl.int64), kmax, k, p, z_all, use_k, use_p,
                                     WAYS, BLOCK_S)
            else:
                lo = _find_threshold(base, V, inv_t, m, lo, kmax, k, p, z_all, use_k, use_p, WAYS, BLOCK_S)
        t = lo.to(tl.int32)
        s_min = m + tl.log(tl.maximum(mp, 0.0))  # min-p in logit space; -inf when min_p <= 0
    tl.store(key_thr_ptr + row, t)
    tl.store(s_min_ptr + row, s_min)


@triton.jit
def _race_kernel(
    logits_ptr, stride_l, temp_ptr, inv_t_ptr, topk_ptr, key_thr_ptr, s_min_ptr, stream_ptr, part_s_ptr, part_i_ptr,
    V, CHUNK, NCHUNK, GREEDY_EPS: tl.constexpr, BLOCK: tl.constexpr,
):
    """Program (row, chunk): the chunk's best (score, index): the raw logit for greedy rows, else a
    Gumbel-max race (philox stream of the row, counter = vocab index) over the kept set."""
    row = tl.program_id(0)
    c = tl.program_id(1)
    base = logits_ptr + row.to(tl.int64) * stride_l
    T = tl.load(temp_ptr + row)
    k = tl.load(topk_ptr + row)
    offs0 = tl.arange(0, BLOCK)
    bestv = tl.full([BLOCK], float("-inf"), tl.float32)
    besti = tl.zeros([BLOCK], tl.int32)
    c0 = c * CHUNK
    c1 = tl.minimum(c0 + CHUNK, V)
    if (T < GREEDY_EPS) | (k == 1):
        for start in range(c0, c1, BLOCK):
            offs = start + offs0
            x = tl.load(base + offs, mask=offs < c1, other=float("-inf")).to(tl.float32)
            upd = x > bestv
            bestv = tl.where(upd, x, bestv)
            besti = tl.where(upd, offs, besti)
    else:
        t = tl.load(key_thr_ptr + row)
        s_min = tl.load(s_min_ptr + row)
        inv_t = tl.load(inv_t_ptr + row)
        stream = tl.load(stream_ptr + row)
        for start in range(c0, c1, BLOCK):
            offs = start + offs0
            s, valid, key = _row_keys(base, offs, c1, inv_t)
            keep = valid & (key >= t) & (s >= s_min)
            u = tl.maximum(tl.rand(stream, offs), 1e-30)
            score = tl.where(keep, s - tl.log(-tl.log(u)), float("-inf"))
            upd = score > bestv
            bestv = tl.where(upd, score, bestv)
            besti = tl.where(upd, offs, besti)
    vmax = tl.max(bestv, 0)
    idx = tl.min(tl.where(bestv == vmax, besti, 2147483647), 0)  # first index among ties
    tl.store(part_s_ptr + row * NCHUNK + c, vmax)
    tl.store(part_i_ptr + row * NCHUNK + c, idx)


def sample_triton(
    logits: torch.Tensor,
    temperature: torch.Tensor,
    top_k: torch.Tensor,
    top_p: torch.Tensor,
    min_p: torch.Tensor,
    seeds: torch.Tensor,
    steps: torch.Tensor,
) -> torch.Tensor:
    """Triton: a threshold kernel (one program per filtered row searches the top-k / top-p key
    threshold, a 5-ary search on int keys, no sort), then a race kernel over (row, vocab chunk) programs
    and a torch argmax over the chunks."""
    return launch_sample(logits, temperature, top_k, top_p, min_p, seeds, steps)


def launch_sample(
    logits: torch.Tensor,
    temperature: torch.Tensor,
    top_k: torch.Tensor,
    top_p: torch.Tensor,
    min_p: torch.Tensor,
    seeds: torch.Tensor,
    steps: torch.Tensor,
    thresholds: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> torch.Tensor:
    """sample_triton; `thresholds` (int32 [B], fp32 [B]) receive each filtered row's key threshold
    and min-p logit bound, which define its kept set (tests use them)."""
    require_triton()
    B, V = logits.shape
    dev = logits.device
    if B == 0:
        return torch.empty(0, dtype=torch.int64, device=dev)
    assert logits.stride(-1) == 1
    temperature, top_k = temperature.float(), top_k.to(torch.int32)
    inv_t = temperature.reciprocal()  # s = logits * inv_t, bit-identical to the reference's
    if thresholds is None:
        thresholds = (torch.empty(B, dtype=torch.int32, device=dev), torch.empty(B, dtype=torch.float32, device=dev))
    key_thr, s_min = thresholds
    BLOCK = min(2048, max(16, next_pow2(V)))
    cand = torch.empty(B, CANDIDATES, dtype=torch.float32, device=dev)
    _threshold_kernel[(B,)](
        logits, logits.stride(0), temperature, inv_t, top_k, top_p.float(), min_p.float(), key_thr, s_min, cand, V,
        CAP=CANDIDATES, GREEDY_EPS=GREEDY_EPS, BLOCK=BLOCK, BLOCK_S=min(1024, BLOCK), WAYS=SEARCH_WAYS, LEVELS=8,
        num_warps=8,
    )
    nchunk = max(1, min(triton.cdiv(V, BLOCK), triton.cdiv(2 * sm_count(dev), B)))
    chunk = triton.cdiv(triton.cdiv(V, nchunk), BLOCK) * BLOCK
    nchunk = triton.cdiv(V, chunk)
    part_s = torch.empty(B, nchunk, dtype=torch.float32, device=dev)
    part_i = torch.empty(B, nchunk, dtype=torch.int32, device=dev)
    _race_kernel[(B, nchunk)](
        logits, logits.stride(0), temperature, inv_t, top_k, key_thr, s_min, mix_seeds(seeds, steps), part_s, part_i,
        V, chunk, nchunk, GREEDY_EPS=GREEDY_EPS, BLOCK=BLOCK, num_warps=4,
    )
    return part_i.gather(1, part_s.argmax(dim=1, keepdim=True)).squeeze(1).to(torch.int64)
