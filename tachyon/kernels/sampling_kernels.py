"""The sampler's three chunked Triton kernels (stats, hist, select: one program per (row, vocabulary
chunk)); the per-row finish kernel is in sampling_finish.py. Their launch sequence, the contract and the
method are in sampling.py (`sample_triton`), the device helpers they share in sampling_device.py. Every
kernel takes its sizes as arguments: no module constant is read here.
"""

from tachyon.kernels._triton import pdl_trigger, pdl_wait, tl, triton
from tachyon.kernels.sampling_device import (
    _at,
    _best,
    _best_rows,
    _bins,
    _compact,
    _fast_pick,
    _fixed,
    _from_fixed,
    _mass_bounds,
    _race_block,
    _race_blocks,
    _row_keys,
    _row_params,
    _sub_bins,
    _take,
    _topk_bin,
    _topk_mass,
    _topp_bins,
)

# Per-row scratch shared by the kernels (zeroed by the stats kernel's chunk 0, summed with integer
# atomics, which are exact and order-independent): rowh [B, NB] (bin counts), rowacc [B, 4] int64
# (fixed-point masses: total, above the P bracket, above the K bracket, inside the P bracket),
# hist2 [B, 2, NB] (sub-bin counts of the P and K brackets), cnt [B, 2] (candidate slots taken).
# Written once by chunk 0: rowf [B, 8] (m, inv_w, s_min, P sub-bin scale), rowi [B, 8] (mode, a1,
# a2, bk, nP, nK, tokens above bk).
# Rejection fast path (FAST, top-p rows with top-k off): fast_s / fast_i [B, R, NCHUNK] (the chunks'
# winners of R extra races), fastw_s / fastw_i [B, R] (the row's winners: s and index), fastacc [B, R + 1]
# int64 (zeroed by stats' chunk 0: the row's fixed-point total, and the mass strictly above each winner's
# key), fast_tok [B] (written by hist's chunk 0: the accepted winner, or -1 when the exact path runs).


@triton.jit(do_not_specialize=["NCHUNK"])
def _stats_kernel(
    logits_ptr, stride_l, temp_ptr, topk_ptr, topp_ptr, minp_ptr, seed_ptr, step_ptr, part_s_ptr, part_i_ptr,
    stat_ptr, rowh_ptr, rowacc_ptr, hist2_ptr, cnt_ptr, fastacc_ptr, fast_tok_ptr, V, CHUNK, NCHUNK,
    NB: tl.constexpr, GREEDY_EPS: tl.constexpr, BLOCK: tl.constexpr, R: tl.constexpr, PDL: tl.constexpr,
):
    """Program (row, chunk), one read of the chunk. Greedy rows: the chunk's best (raw logit, index);
    unfiltered rows: the chunk's Gumbel race winner (score, index) -> part_s / part_i [B, NCHUNK].
    Filtered rows: the chunk's max s and min finite s -> stat [B, 2, NCHUNK]. Chunk 0 zeroes the row's
    atomic accumulators (and sets fast_tok to -1)."""
    pdl_trigger(PDL)
    pdl_wait(PDL)
    row = tl.program_id(0)
    c = tl.program_id(1)
    base = logits_ptr + row.to(tl.int64) * stride_l
    T, k, p, mp, inv_t, greedy, use_k, use_p, filtered = _row_params(temp_ptr, topk_ptr, topp_ptr, minp_ptr, row,
                                                                     V, GREEDY_EPS)
    if c == 0:
        jj = tl.arange(0, NB)
        tl.store(rowh_ptr + row * NB + jj, jj * 0)
        tl.store(hist2_ptr + row * 2 * NB + jj, jj * 0)
        tl.store(hist2_ptr + row * 2 * NB + NB + jj, jj * 0)
        j4 = tl.arange(0, 4)
        tl.store(rowacc_ptr + row * 4 + j4, j4.to(tl.int64) * 0)
        tl.store(cnt_ptr + row * 2 + j4, j4 * 0, mask=j4 < 2)
        jr = tl.arange(0, 2 * R)
        tl.store(fastacc_ptr + row * (R + 1) + jr, jr.to(tl.int64) * 0, mask=jr < R + 1)
        tl.store(fast_tok_ptr + row, -1)
    offs0 = tl.arange(0, BLOCK)
    bestv = tl.full([BLOCK], float("-inf"), tl.float32)
    besti = tl.zeros([BLOCK], tl.int32)
    c0 = c * CHUNK
    c1 = tl.minimum(c0 + CHUNK, V)
    if greedy:
        for start in range(c0, c1, BLOCK):
            offs = start + offs0
            x = tl.load(base + offs, mask=offs < c1, other=float("-inf")).to(tl.float32)
            upd = x > bestv
            bestv = tl.where(upd, x, bestv)
            besti = tl.where(upd, offs, besti)
    elif filtered:
        mv = tl.full([BLOCK], float("-inf"), tl.float32)
        lov = tl.full([BLOCK], float("inf"), tl.float32)
        for start in range(c0, c1, BLOCK):
            s, valid, key = _row_keys(base, start + offs0, c1, inv_t)
            mv = tl.maximum(mv, tl.where(valid, s, float("-inf")))
            lov = tl.minimum(lov, tl.where(valid & (s > float("-inf")), s, float("inf")))
        tl.store(stat_ptr + (row * 2) * NCHUNK + c, tl.max(mv, 0))
        tl.store(stat_ptr + (row * 2 + 1) * NCHUNK + c, tl.min(lov, 0))
    else:
        seed = tl.load(seed_ptr + row)
        step = tl.load(step_ptr + row)
        for start in range(c0, c1, BLOCK):
            offs = start + offs0
            s, valid, key = _row_keys(base, offs, c1, inv_t)
            score = tl.where(valid, _race_block(s, seed, step, start, BLOCK), float("-inf"))
            bestv, besti = _take(bestv, besti, score, offs)
    vmax, idx = _best(bestv, besti)
    tl.store(part_s_ptr + row * NCHUNK + c, vmax)
    tl.store(part_i_ptr + row * NCHUNK + c, idx)


@triton.jit(do_not_specialize=["NCHUNK"])
def _races_kernel(
    logits_ptr, stride_l, temp_ptr, topk_ptr, topp_ptr, minp_ptr, seed_ptr, step_ptr, fast_s_ptr, fast_i_ptr,
    V, CHUNK, NCHUNK, GREEDY_EPS: tl.constexpr, BLOCK: tl.constexpr, R: tl.constexpr, PDL: tl.constexpr,
    FAST_LOG: tl.constexpr = False,
):
    """Program (row, chunk) of a fast-path row (top-p, top-k off), one read of the chunk: the winners
    (score, index) of R Gumbel races in streams 1..R of (seed, step) -> fast_s / fast_i [B, R, NCHUNK].
    A kernel of its own (8 warps: [R, BLOCK] lane state) so that the stats kernel, which every step runs,
    keeps its registers: inside it, greedy B=256 went 48 -> 88 us on the H200."""
    pdl_trigger(PDL)
    pdl_wait(PDL)
    row = tl.program_id(0)
    c = tl.program_id(1)
    T, k, p, mp, inv_t, greedy, use_k, use_p, filtered = _row_params(temp_ptr, topk_ptr, topp_ptr, minp_ptr, row,
                                                                     V, GREEDY_EPS)
    if filtered & use_p & (~use_k):
        base = logits_ptr + row.to(tl.int64) * stride_l
        seed = tl.load(seed_ptr + row)
        step = tl.load(step_ptr + row)
        offs0 = tl.arange(0, BLOCK)
        c0 = c * CHUNK
        c1 = tl.minimum(c0 + CHUNK, V)
        bv = tl.full([R, BLOCK], float("-inf"), tl.float32)  # per race and lane: best (score, index) so far
        bi = tl.zeros([R, BLOCK], tl.int32)
        for start in range(c0, c1, BLOCK):
            offs = start + offs0
            s, valid, key = _row_keys(base, offs, c1, inv_t)
            sc = tl.where(valid[None, :], _race_blocks(s, seed, step, start, R, BLOCK, FAST_LOG), float("-inf"))
            oi = offs[None, :] + bi * 0
            upd = (sc > bv) | ((sc == bv) & (oi < bi))
            bv = tl.where(upd, sc, bv)
            bi = tl.where(upd, oi, bi)
        rv, ri = _best_rows(bv, bi)
        rr = tl.arange(0, R)
        tl.store(fast_s_ptr + (row * R + rr) * NCHUNK + c, rv)
        tl.store(fast_i_ptr + (row * R + rr) * NCHUNK + c, ri)


@triton.jit(do_not_specialize=["NCHUNK"])
def _fastmass_kernel(
    logits_ptr, stride_l, temp_ptr, topk_ptr, topp_ptr, minp_ptr, stat_ptr, fast_s_ptr, fast_i_ptr, fastw_s_ptr,
    fastw_i_ptr, fastacc_ptr, V, CHUNK, NCHUNK, CPAD: tl.constexpr, GREEDY_EPS: tl.constexpr, BLOCK: tl.constexpr,
    R: tl.constexpr, PDL: tl.constexpr,
):
    """Program (row, chunk) of a fast-path row (top-p, top-k off), one read of the chunk: the row's R race
    winners (best over the chunks' winners; chunk 0 stores their s and index in fastw_s / fastw_i), then
    the chunk's fixed-point mass exp(s - m) in total and strictly above each winner's key (-> fastacc)."""
    pdl_trigger(PDL)
    pdl_wait(PDL)
    row = tl.program_id(0)
    c = tl.program_id(1)
    T, k, p, mp, inv_t, greedy, use_k, use_p, filtered = _row_params(temp_ptr, topk_ptr, topp_ptr, minp_ptr, row,
                                                                     V, GREEDY_EPS)
    if filtered & use_p & (~use_k):
        cc = tl.arange(0, CPAD)
        cm = cc < NCHUNK
        m = tl.max(tl.load(stat_ptr + (row * 2) * NCHUNK + cc, mask=cm, other=float("-inf")), 0)
        rr = tl.arange(0, R)
        wi2 = (row * R + rr)[:, None] * NCHUNK + cc[None, :]
        wv, wi = _best_rows(tl.load(fast_s_ptr + wi2, mask=cm[None, :], other=float("-inf")),
                            tl.load(fast_i_ptr + wi2, mask=cm[None, :], other=2147483647))
        base = logits_ptr + row.to(tl.int64) * stride_l
        sw, _, kw = _row_keys(base, wi, V, inv_t)
        if c == 0:
            tl.store(fastw_s_ptr + row * R + rr, sw)
            tl.store(fastw_i_ptr + row * R + rr, wi)
        offs0 = tl.arange(0, BLOCK)
        c0 = c * CHUNK
        c1 = tl.minimum(c0 + CHUNK, V)
        zacc = tl.zeros([BLOCK], tl.int64)
        above = tl.zeros([R, BLOCK], tl.int64)  # lane-wise sums (8 warps), reduced once at the end
        for start in range(c0, c1, BLOCK):
            s, valid, key = _row_keys(base, start + offs0, c1, inv_t)
            ef = _fixed(s, m, valid)
            zacc += ef
            above += tl.where(key[None, :] > kw[:, None], ef[None, :], 0)
        tl.atomic_add(fastacc_ptr + row * (R + 1), tl.sum(zacc, 0))
        tl.atomic_add(fastacc_ptr + row * (R + 1) + 1 + rr, tl.sum(above, 1))


@triton.jit(do_not_specialize=["NCHUNK"])
def _hist_kernel(
    logits_ptr, stride_l, temp_ptr, topk_ptr, topp_ptr, minp_ptr, stat_ptr, rowf_ptr, rowh_ptr, rowacc_ptr,
    hist_ptr, fastacc_ptr, fastw_s_ptr, fastw_i_ptr, fast_tok_ptr, V, CHUNK, NCHUNK, CPAD: tl.constexpr,
    NB: tl.constexpr, GREEDY_EPS: tl.constexpr, BLOCK: tl.constexpr, FAST: tl.constexpr, R: tl.constexpr,
    PDL: tl.constexpr,
):
    """Program (row, chunk) of a filtered row: m = max s, inv_w = NB / (m - min finite s) and
    s_min = m + log(min_p) from the chunk stats (chunk 0 stores them in rowf). FAST top-p rows (top-k
    off): the rejection fast path's pick (chunk 0 stores it in fast_tok); a row with a pick is done.
    Other top-k / top-p rows, one read of the chunk: its count histogram over the NB bins of
    q = (m - s) * inv_w (-> hist [B, NCHUNK, NB], and added to rowh) and its fixed-point mass
    sum(exp(s - m)) (added to rowacc[0])."""
    pdl_trigger(PDL)
    pdl_wait(PDL)
    row = tl.program_id(0)
    c = tl.program_id(1)
    T, k, p, mp, inv_t, greedy, use_k, use_p, filtered = _row_params(temp_ptr, topk_ptr, topp_ptr, minp_ptr, row,
                                                                     V, GREEDY_EPS)
    if filtered:
        cc = tl.arange(0, CPAD)
        cm = cc < NCHUNK
        m = tl.max(tl.load(stat_ptr + (row * 2) * NCHUNK + cc, mask=cm, other=float("-inf")), 0)
        lo = tl.min(tl.load(stat_ptr + (row * 2 + 1) * NCHUNK + cc, mask=cm, other=float("inf")), 0)
        inv_w = NB / tl.maximum(m - lo, 1e-30)
        s_min = tl.where(mp > 0.0, m + tl.log(tl.where(mp > 0.0, mp, 1.0)), float("-inf"))
        tok = row * 0 - 1
        if FAST:
            tok = tl.where(use_p & ~use_k, _fast_pick(fastacc_ptr, fastw_s_ptr, fastw_i_ptr, row, p, s_min, R), -1)
        if c == 0:
            tl.store(rowf_ptr + row * 8, m)
            tl.store(rowf_ptr + row * 8 + 1, inv_w)
            tl.store(rowf_ptr + row * 8 + 2, s_min)
            tl.store(fast_tok_ptr + row, tok)
        if (use_k | use_p) & (tok < 0):
            base = logits_ptr + row.to(tl.int64) * stride_l
            offs0 = tl.arange(0, BLOCK)
            jj = tl.arange(0, NB)
            c0 = c * CHUNK
            c1 = tl.minimum(c0 + CHUNK, V)
            hist = tl.zeros([NB], tl.int32)
            zacc = tl.zeros([BLOCK], tl.int64)
            for start in range(c0, c1, BLOCK):
                s, valid, key = _row_keys(base, start + offs0, c1, inv_t)
                q, b = _bins(s, valid, m, inv_w, NB)
                zacc += _fixed(s, m, valid)
                hist += tl.histogram(tl.where(valid, b, 0), NB)  # invalid lanes counted in bin 0 ...
                hist -= tl.where(jj == 0, BLOCK - tl.sum(valid.to(tl.int32), 0), 0)  # ... and removed
            tl.store(hist_ptr + (row * NCHUNK + c) * NB + jj, hist)
            tl.atomic_add(rowh_ptr + row * NB + jj, hist)
            tl.atomic_add(rowacc_ptr + row * 4, tl.sum(zacc, 0))


@triton.jit(do_not_specialize=["NCHUNK"])
def _select_kernel(
    logits_ptr, stride_l, temp_ptr, topk_ptr, topp_ptr, minp_ptr, seed_ptr, step_ptr, part_s_ptr, part_i_ptr,
    rowf_ptr, rowi_ptr, rowh_ptr, rowacc_ptr, hist_ptr, hist2_ptr, cnt_ptr, cand_s_ptr, cand_i_ptr, fast_tok_ptr,
    V, CHUNK, NCHUNK, CAP, NB: tl.constexpr, GREEDY_EPS: tl.constexpr, BLOCK: tl.constexpr, PDL: tl.constexpr,
):
    """Program (row, chunk) of a filtered row, one read of the chunk.
    Top-k / top-p rows: from the row's bin counts and total mass (every program of the row derives the
    same brackets): the top-k bin bk (exact) and the bins [a1, a2] that can hold the top-p threshold
    (count-based mass bounds), and whether their tokens fit the CAP candidates. DIRECT: the chunk
    compacts its bracket tokens into the row's candidates (P bracket at [0, nP), K bracket at
    [nP, nP + nK); slots taken with one atomic per bracket: the order may vary, nothing computed
    from the candidates depends on it). REFINE: it adds its sub-bin counts of both brackets to hist2.
    Either way it adds its fixed-point masses above / inside the brackets to rowacc.
    Every filtered row: the chunk's race winner among the tokens surely kept (s >= s_min and above
    both brackets) -> part_s / part_i. Chunk 0 stores the brackets. Rows the fast path picked are done."""
    pdl_trigger(PDL)
    pdl_wait(PDL)
    row = tl.program_id(0)
    c = tl.program_id(1)
    T, k, p, mp, inv_t, greedy, use_k, use_p, filtered = _row_params(temp_ptr, topk_ptr, topp_ptr, minp_ptr, row,
                                                                     V, GREEDY_EPS)
    if filtered & (tl.load(fast_tok_ptr + row) < 0):
        base = logits_ptr + row.to(tl.int64) * stride_l
        m = tl.load(rowf_ptr + row * 8)
        inv_w = tl.load(rowf_ptr + row * 8 + 1)
        s_min = tl.load(rowf_ptr + row * 8 + 2)
        jj = tl.arange(0, NB)
        offs0 = tl.arange(0, BLOCK)
        # Branch-free (tl.where, masked atomics): triton 3.6 mis-assigned scalars set inside these nested
        # run-time ifs on the H200 (nK took another value; benchmarks/kernels/sample_debug.py).
        kp = use_k | use_p
        h = tl.load(rowh_ptr + row * NB + jj)  # zeroed by the stats kernel: all 0 on min-p-only rows
        z = _from_fixed(tl.load(rowacc_ptr + row * 4))
        jf = jj.to(tl.float32)
        L, U, e_lo = _mass_bounds(h, jf, jf + 1.0, 1.0 / inv_w, True, NB)
        bk_k, n_bk_k = _topk_bin(h, 0, k, NB)
        zk_lo, zk_hi = _topk_mass(L, U, e_lo, bk_k, n_bk_k, k, 0.0, NB)
        z_lo = tl.where(use_k, zk_lo, z)
        z_hi = tl.where(use_k, tl.minimum(zk_hi, z * 1.0001), z)
        z_tol = V * 1.8189894035458565e-12  # fixed-point truncation of the total
        p1, p2 = _topp_bins(L, U, 0.0, z_lo, z_hi, p, z * 0.9999 - z_tol, z * 1.0001 + z_tol, NB)
        a2 = tl.where(use_k, tl.minimum(p2, bk_k), p2)  # top-p's threshold is at or above top-k's
        a1 = tl.where(use_k, tl.minimum(p1, a2), p1)
        nP = tl.where(use_p, tl.sum(tl.where((jj >= a1) & (jj <= a2), h, 0), 0), 0)
        nK = tl.where(use_k, _at(h, jj, bk_k), 0)
        # defaults (min-p-only rows; top-k-only rows have no P bracket): every token above both brackets
        a1 = tl.where(use_p, a1, NB)
        a2 = tl.where(kp, a2, NB - 1)
        bk = tl.where(use_k, bk_k, NB)
        n_bk = tl.where(use_k, n_bk_k, 0)
        direct = tl.where(kp, ((nP >= 0) & (nK >= 0) & (nP + nK <= CAP)).to(tl.int32), 1)
        sP = tl.where(kp, NB / tl.maximum(a2 - a1 + 1, 1).to(tl.float32), 1.0)
        take = kp & (direct != 0)  # this chunk's candidate slots
        hc = tl.where(take, tl.load(hist_ptr + (row * NCHUNK + c) * NB + jj), 0)
        # every chunk takes its slots with one atomic per bracket (adding 0 where it has none to take)
        runP = tl.atomic_add(cnt_ptr + row * 2, tl.sum(tl.where((jj >= a1) & (jj <= a2), hc, 0), 0))
        runK = tl.atomic_add(cnt_ptr + row * 2 + 1, _at(hc, jj, bk))
        runP = tl.where(take, runP, 0)
        runK = nP + tl.where(take, runK, 0)
        seed = tl.load(seed_ptr + row)
        step = tl.load(step_ptr + row)
        bestv = tl.full([BLOCK], float("-inf"), tl.float32)
        besti = tl.zeros([BLOCK], tl.int32)
        aP = (k * 0).to(tl.int64)  # fixed-point masses: above the P bracket, above bk, inside the P bracket
        aK = aP
        mP = aP
        hP = tl.zeros([NB], tl.int32)
        hK = tl.zeros([NB], tl.int32)
        cbase = row.to(tl.int64) * CAP
        a1f = a1.to(tl.float32)
        bkf = bk.to(tl.float32)
        c0 = c * CHUNK
        c1 = tl.minimum(c0 + CHUNK, V)
        for start in range(c0, c1, BLOCK):
            offs = start + offs0
            s, valid, key = _row_keys(base, offs, c1, inv_t)
            q, b = _bins(s, valid, m, inv_w, NB)
            inP = valid & (b >= a1) & (b <= a2)  # a1 = NB without top-p, bk = NB without top-k
            inK = valid & (b == bk)
            ef = tl.where(kp, _fixed(s, m, valid), 0)
            aP += tl.sum(tl.where(b < a1, ef, 0), 0)
            aK += tl.sum(tl.where(b < bk, ef, 0), 0)
            mP += tl.sum(tl.where(inP, ef, 0), 0)
            sure = valid & (s >= s_min) & (b < a1) & (b < bk)
            if tl.max(sure.to(tl.int32), 0) > 0:
                score = tl.where(sure, _race_block(s, seed, step, start, BLOCK), float("-inf"))
                bestv, besti = _take(bestv, besti, score, offs)
            if direct != 0:  # slots bounded to the row's regions whatever the counts (no stray store)
                runP = _compact(cand_s_ptr, cand_i_ptr, cbase, inP, s, offs, runP, 0, nP)
                runK = _compact(cand_s_ptr, cand_i_ptr, cbase, inK, s, offs, runK, nP, nP + nK)
            else:
                hP += tl.histogram(tl.where(inP, _sub_bins(q, a1f, sP, NB), 0), NB)
                hP -= tl.where(jj == 0, BLOCK - tl.sum(inP.to(tl.int32), 0), 0)
                hK += tl.histogram(tl.where(inK, _sub_bins(q, bkf, NB * 1.0, NB), 0), NB)
                hK -= tl.where(jj == 0, BLOCK - tl.sum(inK.to(tl.int32), 0), 0)
        vmax, idx = _best(bestv, besti)
        tl.store(part_s_ptr + row * NCHUNK + c, vmax)
        tl.store(part_i_ptr + row * NCHUNK + c, idx)
        if use_k | use_p:
            tl.atomic_add(rowacc_ptr + row * 4 + 1, aP)
            tl.atomic_add(rowacc_ptr + row * 4 + 2, aK)
            tl.atomic_add(rowacc_ptr + row * 4 + 3, mP)
            if direct == 0:
                tl.atomic_add(hist2_ptr + row * 2 * NB + jj, hP)
                tl.atomic_add(hist2_ptr + row * 2 * NB + NB + jj, hK)
            if c == 0:
                tl.store(rowi_ptr + row * 8, 2 - direct)  # mode: 1 DIRECT, 2 REFINE (3 FALLBACK: finish)
                tl.store(rowi_ptr + row * 8 + 1, a1)
                tl.store(rowi_ptr + row * 8 + 2, a2)
                tl.store(rowi_ptr + row * 8 + 3, bk)
                tl.store(rowi_ptr + row * 8 + 4, nP)
                tl.store(rowi_ptr + row * 8 + 5, nK)
                tl.store(rowi_ptr + row * 8 + 6, n_bk)
                tl.store(rowf_ptr + row * 8 + 3, sP)
