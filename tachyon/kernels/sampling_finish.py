"""The sampler's last Triton kernel, one program per row (finish): the exact thresholds on the candidates
the chunked kernels (sampling_kernels.py) compacted, the refine / fallback passes, the token. Launch
sequence, contract and method: sampling.py (`sample_triton`); shared device helpers: sampling_device.py.
"""

from tachyon.kernels._triton import pdl_trigger, pdl_wait, tl, triton
from tachyon.kernels.sampling_device import (
    _at,
    _best,
    _bins,
    _compact,
    _find_threshold,
    _fixed,
    _from_fixed,
    _key_range,
    _mass_bounds,
    _mass_from,
    _race_at,
    _race_block,
    _row_keys,
    _row_params,
    _search,
    _sub_bins,
    _take,
    _topk_bin,
    _topk_mass,
    _topp_bins,
    _topp_target,
)


@triton.jit(do_not_specialize=["NCHUNK"])
def _finish_kernel(
    logits_ptr, stride_l, temp_ptr, topk_ptr, topp_ptr, minp_ptr, seed_ptr, step_ptr, part_s_ptr, part_i_ptr,
    rowf_ptr, rowi_ptr, rowacc_ptr, hist2_ptr, cand_s_ptr, cand_i_ptr, fast_tok_ptr, out_ptr, key_thr_ptr, s_min_ptr,
    V, NCHUNK, CAP, CPAD: tl.constexpr, NB: tl.constexpr, GREEDY_EPS: tl.constexpr,
    BLOCK: tl.constexpr, BLOCK_C: tl.constexpr, WAYS: tl.constexpr, PDL: tl.constexpr,
):
    """Program per row: the token (best of the chunk races and of the candidates' race) -> out, and
    the kept set (key threshold, min-p logit bound) -> key_thr / s_min.
    Top-k / top-p rows. REFINE: the sub-bin counts narrow both brackets to sub-brackets (bounds
    anchored on the exact masses above / inside the P bracket); one pass over the row compacts the
    sub-bracket tokens (in vocabulary order), adds the exact mass above them and races the bracket
    tokens above both sub-brackets; if they exceed CAP, the whole-row search runs instead (FALLBACK).
    Then, on the candidates: top-k threshold = count search for the key of the (k - tokens above)-th
    candidate of the K bracket; top-p threshold = mass search for the key where the mass above the P
    bracket plus the candidates' mass at or above it reaches top_p * (top-k mass, or total); the
    threshold is the larger one, and the candidates race with it.
    A row the rejection fast path picked (fast_tok >= 0) takes that token; its kept set is not computed
    (key_thr INT32_MIN, s_min -inf)."""
    pdl_trigger(PDL)
    pdl_wait(PDL)
    row = tl.program_id(0)
    base = logits_ptr + row.to(tl.int64) * stride_l
    T, k, p, mp, inv_t, greedy, use_k, use_p, filtered = _row_params(temp_ptr, topk_ptr, topp_ptr, minp_ptr, row,
                                                                     V, GREEDY_EPS)
    fast_tok = tl.load(fast_tok_ptr + row)
    filtered = filtered & (fast_tok < 0)
    cc = tl.arange(0, CPAD)
    cm = cc < NCHUNK
    best_s, best_i = _best(tl.load(part_s_ptr + row * NCHUNK + cc, mask=cm, other=float("-inf")),
                           tl.load(part_i_ptr + row * NCHUNK + cc, mask=cm, other=2147483647))
    t = -2147483648  # keep every key ...
    s_min = -float("inf")  # ... and every logit, unless filtered below
    if filtered:
        s_min = tl.load(rowf_ptr + row * 8 + 2)
        if use_k | use_p:
            m = tl.load(rowf_ptr + row * 8)
            inv_w = tl.load(rowf_ptr + row * 8 + 1)
            sP = tl.load(rowf_ptr + row * 8 + 3)
            mode = tl.load(rowi_ptr + row * 8)
            a1 = tl.load(rowi_ptr + row * 8 + 1)
            a2 = tl.load(rowi_ptr + row * 8 + 2)
            bk = tl.load(rowi_ptr + row * 8 + 3)
            nP = tl.load(rowi_ptr + row * 8 + 4)
            nK = tl.load(rowi_ptr + row * 8 + 5)
            n_bk = tl.load(rowi_ptr + row * 8 + 6)
            zi = tl.load(rowacc_ptr + row * 4)
            aP = tl.load(rowacc_ptr + row * 4 + 1)
            aK = tl.load(rowacc_ptr + row * 4 + 2)
            seed = tl.load(seed_ptr + row)
            step = tl.load(step_ptr + row)
            offs0 = tl.arange(0, BLOCK)
            if mode == 2:  # REFINE: narrow both brackets to sub-bins, then compact
                jj = tl.arange(0, NB)
                hP = tl.load(hist2_ptr + row * 2 * NB + jj)
                hK = tl.load(hist2_ptr + row * 2 * NB + NB + jj)
                w = 1.0 / inv_w
                jf = jj.to(tl.float32)
                a1f = a1.to(tl.float32)
                bkf = bk.to(tl.float32)
                z = _from_fixed(zi)
                # the K sub-bracket (a sub-bin of bk) and the P one (sub-bins [a1s, a2s]); branch-free, as in
                # the select kernel (scalars set inside nested run-time ifs were mis-assigned on the H200)
                L, U, e_lo = _mass_bounds(hK, bkf + jf / NB, bkf + (jf + 1.0) / NB, w, bk == NB - 1, NB)
                bk2_k, n_bk2_k = _topk_bin(hK, n_bk, k, NB)
                zk_lo, zk_hi = _topk_mass(L, U, e_lo, bk2_k, n_bk2_k, k, _from_fixed(aK), NB)
                bk2 = tl.where(use_k, bk2_k, NB)
                n_bk2 = tl.where(use_k, n_bk2_k, n_bk)
                z_lo = tl.where(use_k, zk_lo, z)
                z_hi = tl.where(use_k, tl.minimum(zk_hi, z * 1.0001), z)
                L, U, e_lo = _mass_bounds(hP, a1f + jf / sP, a1f + (jf + 1.0) / sP, w, a2 == NB - 1, NB)
                m_p = _from_fixed(tl.load(rowacc_ptr + row * 4 + 3))
                m_tol = nP * 1.8189894035458565e-12
                p1s, p2s = _topp_bins(L, U, _from_fixed(aP), z_lo, z_hi, p, m_p * 0.9999 - m_tol,
                                      m_p * 1.0001 + m_tol, NB)
                a1s = tl.where(use_p, p1s, NB)
                a2s = tl.where(use_p, p2s, NB - 1)
                nP2 = tl.sum(tl.where((jj >= a1s) & (jj <= a2s), hP, 0), 0)
                nK2 = _at(hK, jj, bk2)
                if (nP2 >= 0) & (nK2 >= 0) & (nP2 + nK2 <= CAP):
                    mode = 1
                    cbase = row.to(tl.int64) * CAP
                    runP = nP2 * 0
                    runK = nP2
                    aPx = tl.zeros([BLOCK], tl.int64)
                    aKx = tl.zeros([BLOCK], tl.int64)
                    bv_r = tl.full([BLOCK], float("-inf"), tl.float32)
                    bi_r = tl.zeros([BLOCK], tl.int32)
                    for start in range(0, V, BLOCK):
                        offs = start + offs0
                        s, valid, key = _row_keys(base, offs, V, inv_t)
                        q, b = _bins(s, valid, m, inv_w, NB)
                        inP1 = valid & (b >= a1) & (b <= a2)
                        inK1 = valid & (b == bk)
                        subP = _sub_bins(q, a1f, sP, NB)
                        subK = _sub_bins(q, bkf, NB * 1.0, NB)
                        upP = inP1 & (subP < a1s)  # in the P bracket, above its sub-bracket
                        upK = inK1 & (subK < bk2)
                        ef = _fixed(s, m, valid)
                        aPx += tl.where(upP, ef, 0)
                        aKx += tl.where(upK, ef, 0)
                        above1 = (b < a1) & (b < bk)  # raced by the select kernel
                        sure = valid & (s >= s_min) & ((b < a1) | upP) & ((b < bk) | upK) & ~above1
                        if tl.max(sure.to(tl.int32), 0) > 0:
                            score = tl.where(sure, _race_block(s, seed, step, start, BLOCK), float("-inf"))
                            bv_r, bi_r = _take(bv_r, bi_r, score, offs)
                        inP2 = inP1 & (subP >= a1s) & (subP <= a2s)
                        runP = _compact(cand_s_ptr, cand_i_ptr, cbase, inP2, s, offs, runP, 0, nP2)
                        inK2 = inK1 & (subK == bk2)
                        runK = _compact(cand_s_ptr, cand_i_ptr, cbase, inK2, s, offs, runK, nP2, nP2 + nK2)
                    vmax, vidx = _best(bv_r, bi_r)
                    better = (vmax > best_s) | ((vmax == best_s) & (vidx < best_i))
                    best_s = tl.where(better, vmax, best_s)
                    best_i = tl.where(better, vidx, best_i)
                    aP += tl.sum(aPx, 0)
                    aK += tl.sum(aKx, 0)
                    nP = nP2
                    nK = nK2
                    n_bk = n_bk2
                else:
                    mode = 3
            if mode == 1:  # exact thresholds on the candidates
                pbase = cand_s_ptr + row.to(tl.int64) * CAP
                kbase = pbase + nP
                lo = (k * 0).to(tl.int64) - 2147483648
                zk = zi
                if use_k:
                    kmin, kmax = _key_range(kbase, nK, BLOCK_C)
                    lo = _search(kbase, nK, 1.0, m, kmin, kmax, (k - n_bk).to(tl.int64), False, WAYS, BLOCK_C)
                    zk = aK + _mass_from(kbase, nK, 1.0, m, lo, BLOCK_C)
                if use_p:
                    kmin, kmax = _key_range(pbase, nP, BLOCK_C)
                    tp = _search(pbase, nP, 1.0, m, kmin, kmax, _topp_target(p, zk) - aP, True, WAYS, BLOCK_C)
                    lo = tl.maximum(lo, tp)
                t = lo.to(tl.int32)
                offc = tl.arange(0, BLOCK_C)
                bv_c = tl.full([BLOCK_C], float("-inf"), tl.float32)
                bi_c = tl.full([BLOCK_C], 2147483647, tl.int32)
                for start in range(0, nP + nK, BLOCK_C):
                    offs = start + offc
                    s, valid, key = _row_keys(pbase, offs, nP + nK, 1.0)
                    idx = tl.load(cand_i_ptr + row.to(tl.int64) * CAP + offs, mask=valid, other=0)
                    keep = valid & (key >= t) & (s >= s_min)
                    score = tl.where(keep, _race_at(s, seed, step, idx), float("-inf"))
                    bv_c, bi_c = _take(bv_c, bi_c, score, tl.where(keep, idx, 2147483647))
                vmax, vidx = _best(bv_c, bi_c)
                better = (vmax > best_s) | ((vmax == best_s) & (vidx < best_i))
                best_s = tl.where(better, vmax, best_s)
                best_i = tl.where(better, vidx, best_i)
            else:  # FALLBACK: whole-row exact search and race (single program; massive ties only)
                kminv = tl.full([BLOCK], 2147483647, tl.int32)
                kmaxv = tl.full([BLOCK], -2147483648, tl.int32)
                for start in range(0, V, BLOCK):
                    s, valid, key = _row_keys(base, start + offs0, V, inv_t)
                    kminv = tl.where(valid, tl.minimum(kminv, key), kminv)
                    kmaxv = tl.where(valid, tl.maximum(kmaxv, key), kmaxv)
                lo = _find_threshold(base, V, inv_t, m, tl.min(kminv, 0).to(tl.int64), tl.max(kmaxv, 0).to(tl.int64),
                                     k, p, zi, use_k, use_p, WAYS, BLOCK)
                t = lo.to(tl.int32)
                bv_f = tl.full([BLOCK], float("-inf"), tl.float32)
                bi_f = tl.zeros([BLOCK], tl.int32)
                for start in range(0, V, BLOCK):
                    offs = start + offs0
                    s, valid, key = _row_keys(base, offs, V, inv_t)
                    keep = valid & (key >= t) & (s >= s_min)
                    score = tl.where(keep, _race_block(s, seed, step, start, BLOCK), float("-inf"))
                    bv_f, bi_f = _take(bv_f, bi_f, score, offs)
                vmax, vidx = _best(bv_f, bi_f)
                better = (vmax > best_s) | ((vmax == best_s) & (vidx < best_i))
                best_s = tl.where(better, vmax, best_s)
                best_i = tl.where(better, vidx, best_i)
    tl.store(out_ptr + row, tl.where(fast_tok >= 0, fast_tok, best_i).to(tl.int64))
    tl.store(key_thr_ptr + row, t)
    tl.store(s_min_ptr + row, s_min)
