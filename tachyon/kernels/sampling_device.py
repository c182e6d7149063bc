"""Device functions of the Triton sampler (`sampling.py` holds the contract, the reference, the kernels
and the launch): order-preserving keys and histogram bins, int64 fixed-point masses, the philox Gumbel
race, the bracket arithmetic on histograms, bounded candidate compaction, and the exact (WAYS+1)-ary
key search used on candidates and by the whole-row fallback. All are @triton.jit helpers, inlined into
the kernels; none reads module state.
"""

from tachyon.kernels._triton import tl, triton


@triton.jit
def _row_params(temp_ptr, topk_ptr, topp_ptr, minp_ptr, row, V, GREEDY_EPS: tl.constexpr):
    """A row's parameters and its class: greedy (argmax), top-k / top-p use, filtered (any filter)."""
    T = tl.load(temp_ptr + row)
    k = tl.load(topk_ptr + row)
    p = tl.load(topp_ptr + row)
    mp = tl.load(minp_ptr + row)
    greedy = (T < GREEDY_EPS) | (k == 1)
    use_k = (k > 1) & (k < V)
    use_p = p < 1.0
    filtered = (~greedy) & (use_k | use_p | (mp > 0.0))
    inv_t = tl.math.div_rn(1.0, tl.maximum(T, GREEDY_EPS))  # IEEE 1 / T (the reference's reciprocal)
    return T, k, p, mp, inv_t, greedy, use_k & filtered, use_p & filtered, filtered


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
def _bins(s, valid, m, inv_w, NB: tl.constexpr):
    """q = (m - s) / w (0 on invalid lanes) and its bin min(floor(q), NB - 1) (-inf logits land in the
    last bin)."""
    q = (m - tl.where(valid, s, m)) * inv_w
    return q, tl.minimum(tl.maximum(q, 0.0), NB - 1.0).to(tl.int32)


@triton.jit
def _sub_bins(q, q0, scale, NB: tl.constexpr):
    """Sub-bin min(floor((q - q0) * scale), NB - 1) of a bracket starting at bin q0."""
    return tl.minimum(tl.maximum((q - q0) * scale, 0.0), NB - 1.0).to(tl.int32)


@triton.jit
def _fixed(s, m, valid):
    """exp(s - m) (0 on invalid lanes) as int64 fixed point (2^40 = 1): exact, order-free sums."""
    return (tl.where(valid, tl.exp(tl.where(valid, s, m) - m), 0.0) * 1099511627776.0).to(tl.int64)


@triton.jit
def _gumbel(s, r):
    """Gumbel-perturbed score from one philox word r."""
    u = tl.maximum(tl.uint_to_uniform_float(r), 1e-30)
    return s - tl.log(-tl.log(u))


@triton.jit
def _log2_fast(x, FAST: tl.constexpr):
    """log2(x) for x > 0: the SFU's lg2.approx.f32 (absolute error ~2^-22) when FAST (compiled code; the
    interpreter has no inline PTX), else tl.log2."""
    if FAST:
        return tl.inline_asm_elementwise("lg2.approx.f32 $0, $1;", "=f,f", [x], dtype=tl.float32, is_pure=True,
                                         pack=1)
    else:
        return tl.log2(x)


@triton.jit
def _gumbel_fast(s, r, FAST: tl.constexpr):
    """s + Gumbel noise from one philox word r, as _gumbel, with two SFU logarithms instead of libdevice's:
    -log(u) is Exp(1); for u > 3/4 (small values, where an absolute log error would be a large relative
    one) it is 2 atanh(v / (2 - v)) with v = 1 - u (exact), summed to z^9 (relative error < 1e-8); the
    outer log's absolute error is what the score gets (~1e-7)."""
    u = tl.maximum(tl.uint_to_uniform_float(r), 1e-30)
    v = 1.0 - u
    z = v / (2.0 - v)
    z2 = z * z
    e_small = 2.0 * z * (1.0 + z2 * (1.0 / 3.0 + z2 * (1.0 / 5.0 + z2 * (1.0 / 7.0 + z2 * (1.0 / 9.0)))))
    e = tl.where(u > 0.75, e_small, -0.6931471805599453 * _log2_fast(u, FAST))
    return s - 0.6931471805599453 * _log2_fast(e, FAST)


@triton.jit
def _philox(seed, step, i4):
    """The 4 philox words of counter i4 in the stream of (seed, step)."""
    z = i4 * 0
    return tl.philox(seed, i4, z + step.to(tl.uint32), z + (step >> 32).to(tl.uint32), z)  # low / high words


@triton.jit
def _race_block(s, seed, step, start, BLOCK: tl.constexpr):
    """Gumbel scores of the block of vocab indices start + [0, BLOCK) (start % 4 == 0): index i uses
    word i % 4 of counter i // 4, so one philox call serves 4 indices."""
    r0, r1, r2, r3 = _philox(seed, step, (start // 4 + tl.arange(0, BLOCK // 4)).to(tl.uint32))
    return _gumbel(s, tl.reshape(tl.join(tl.join(r0, r2), tl.join(r1, r3)), [BLOCK]))


@triton.jit
def _race_blocks(s, seed, step, start, R: tl.constexpr, BLOCK: tl.constexpr, FAST: tl.constexpr):
    """Gumbel scores [R, BLOCK] of the block of vocab indices start + [0, BLOCK) in R further independent
    streams of (seed, step): race r uses philox counter word 3 = r + 1 (the main race, _race_block, uses
    0); index i uses word i % 4 of counter i // 4, as there. _gumbel_fast: these races only pick
    candidates for the rejection test (their scores never meet the main race's)."""
    i4 = (start // 4 + tl.arange(0, BLOCK // 4)).to(tl.uint32)[None, :] + tl.zeros([R, BLOCK // 4], tl.uint32)
    c3 = (tl.arange(0, R) + 1).to(tl.uint32)[:, None] + i4 * 0
    z = i4 * 0
    r0, r1, r2, r3 = tl.philox(seed, i4, z + step.to(tl.uint32), z + (step >> 32).to(tl.uint32), c3)
    return _gumbel_fast(s[None, :], tl.reshape(tl.join(tl.join(r0, r2), tl.join(r1, r3)), [R, BLOCK]), FAST)


@triton.jit
def _race_at(s, seed, step, idx):
    """Gumbel scores of arbitrary vocab indices idx (same stream and words as _race_block)."""
    r0, r1, r2, r3 = _philox(seed, step, (idx // 4).to(tl.uint32))
    j = idx % 4
    return _gumbel(s, tl.where(j == 0, r0, tl.where(j == 1, r1, tl.where(j == 2, r2, r3))))


@triton.jit
def _take(bestv, besti, score, idx):
    """Per-lane running best (score, index): higher score, then lower index."""
    upd = (score > bestv) | ((score == bestv) & (idx < besti))
    return tl.where(upd, score, bestv), tl.where(upd, idx, besti)


@triton.jit
def _best(bestv, besti):
    """(score, index) of a lane vector's best: the max score, the lowest index among ties."""
    vmax = tl.max(bestv, 0)
    return vmax, tl.min(tl.where(bestv == vmax, besti, 2147483647), 0)


@triton.jit
def _best_rows(bestv, besti):
    """Per row of [R, N] lane tiles: (max score, lowest index among its ties) -> two [R] vectors."""
    vmax = tl.max(bestv, 1)
    return vmax, tl.min(tl.where(bestv == vmax[:, None], besti, 2147483647), 1)


@triton.jit
def _mass_bounds(h, q_lo, q_hi, w, open_last, NB: tl.constexpr):
    """Lower / upper bounds on the exp(s - m) mass of the h[j] tokens with q in [q_lo[j], q_hi[j])
    (d = m - s = q * w), with slack for fp32 exp / rounding and for fixed-point truncation; with
    open_last the last bin is unbounded (-inf logits, clamped q): its lower bound is 0.
    Returns (lower [NB], upper [NB], per-token lower [NB])."""
    jj = tl.arange(0, NB)
    e_hi = tl.exp(-q_lo * w) * 1.0001
    e_lo = tl.maximum(tl.exp(-q_hi * w) * 0.9999 - 1.8189894035458565e-12, 0.0)
    e_lo = tl.where(jj == tl.where(open_last, NB - 1, NB), 0.0, e_lo)
    hf = h.to(tl.float32)
    return hf * e_lo, hf * e_hi, e_lo


@triton.jit
def _at(x, jj, j):
    """x[j] of a vector (a masked sum)."""
    return tl.sum(tl.where(jj == j, x, 0), 0)


@triton.jit
def _topk_bin(h, n_above, k, NB: tl.constexpr):
    """Bin of the k-th largest token among NB bins holding h tokens below n_above others (exact), and
    the number of tokens above that bin."""
    jj = tl.arange(0, NB)
    cnt = n_above + tl.cumsum(h, 0)  # tokens at or above each bin
    bk = tl.minimum(tl.sum((cnt < k).to(tl.int32), 0), NB - 1)
    return bk, _at(cnt - h, jj, bk)


@triton.jit
def _topk_mass(L, U, e_lo, bk, n_bk, k, a_mass, NB: tl.constexpr):
    """Bounds on the top-k mass: a_mass (exact, above the bins) + the bins above bk + at least
    k - n_bk tokens of bin bk (lower) or all of it (upper)."""
    jj = tl.arange(0, NB)
    z_lo = a_mass + tl.sum(tl.where(jj < bk, L, 0.0), 0) + (k - n_bk).to(tl.float32) * _at(e_lo, jj, bk)
    return z_lo, a_mass + tl.sum(tl.where(jj <= bk, U, 0.0), 0)


@triton.jit
def _topp_bins(L, U, a_mass, z_lo, z_hi, p, tot_lo, tot_hi, NB: tl.constexpr):
    """Bins [a1, a2] that can hold the top-p threshold's token: with the exact mass a_mass above the
    bins, the mass at or above bin j lies in a_mass + [CL_j, CU_j] (cumulative bounds, tightened with
    the bins' total mass in [tot_lo, tot_hi]); the target p * z with z in [z_lo, z_hi] is reached
    first in a bin no earlier than a1 (where even the upper bound reaches the lowest target) and no
    later than a2 (where the lower bound reaches the highest)."""
    CL = tl.cumsum(L, 0)
    CU = tl.cumsum(U, 0)
    CU2 = tl.minimum(CU, tot_hi - (tl.sum(L, 0) - CL))
    CL2 = tl.maximum(CL, tot_lo - (tl.sum(U, 0) - CU))
    t_lo = tl.maximum(p * z_lo, 1e-30)  # top_p <= 0 keeps the top token
    t_hi = tl.maximum(p * z_hi, 1e-30)
    a1 = tl.sum((a_mass + CU2 < t_lo).to(tl.int32), 0)
    a2 = tl.minimum(tl.sum((a_mass + CL2 < t_hi).to(tl.int32), 0), NB - 1)
    return tl.minimum(a1, a2), a2


@triton.jit
def _compact(cand_s_ptr, cand_i_ptr, cbase, sel, s, offs, run, lo, hi):
    """Append the selected (s, index) pairs of a block at slots run, run + 1, ... of the row's candidate
    region; only slots in [lo, hi) are written, whatever the counts (no stray store). Returns the new run."""
    n = sel.to(tl.int32)
    slot = run + tl.cumsum(n, 0) - 1
    ok = sel & (slot >= lo) & (slot < hi)
    tl.store(cand_s_ptr + cbase + slot, s, mask=ok)
    tl.store(cand_i_ptr + cbase + slot, offs, mask=ok)
    return run + tl.sum(n, 0)


@triton.jit
def _to_fixed(x):
    """A non-negative fp32 mass as int64 fixed point (2^40 = 1)."""
    return (x * 1099511627776.0).to(tl.int64)


@triton.jit
def _from_fixed(x):
    """An int64 fixed-point mass as fp32."""
    return x.to(tl.float32) * 9.094947017729282e-13


@triton.jit
def _search(base, V, inv_t, m, lo, hi, target, MASS: tl.constexpr, WAYS: tl.constexpr, BLOCK: tl.constexpr):
    """Largest key threshold t in [lo, hi] with stat(key >= t) >= target (int64), where stat is the
    count (MASS False) or the fixed-point exp(s - m) mass of the keys at or above t among the V values
    at base (order-independent integer sums); requires stat(lo) >= target (else returns lo). Each pass
    over the values tests WAYS thresholds at once (a (WAYS+1)-ary search on the int keys: about
    log_{WAYS+1}(hi - lo) passes; a count search stops early when exactly `target` keys pass)."""
    offs0 = tl.arange(0, BLOCK)
    jj = tl.arange(0, WAYS)
    while lo < hi:
        mids = lo + 1 + ((hi - lo - 1) * (jj + 1)) // WAYS  # increasing, in (lo, hi], last == hi
        stat_j = tl.zeros([WAYS], tl.int64)
        for start in range(0, V, BLOCK):
            s, valid, key = _row_keys(base, start + offs0, V, inv_t)
            ge = key[:, None] >= mids[None, :]
            if MASS:
                stat_j += tl.sum(tl.where(ge, _fixed(s, m, valid)[:, None], 0), 0)
            else:
                stat_j += tl.sum(ge.to(tl.int64), 0)
        n_true = tl.sum((stat_j >= target).to(tl.int32), 0)  # thresholds passing (a prefix of mids)
        if n_true > 0:
            lo = tl.sum(tl.where(jj == n_true - 1, mids, 0), 0)
            if not MASS:
                if tl.sum(tl.where(jj == n_true - 1, stat_j, 0), 0) == target:
                    hi = lo  # exactly k keys at or above: this threshold keeps the top k
        if n_true < WAYS:
            hi = tl.minimum(hi, tl.sum(tl.where(jj == n_true, mids, 0), 0) - 1)
    return lo


@triton.jit
def _key_range(base, n, BLOCK: tl.constexpr):
    """(min, max) int64 key of the n values at base (min > max when n == 0)."""
    offs0 = tl.arange(0, BLOCK)
    kminv = tl.full([BLOCK], 2147483647, tl.int32)
    kmaxv = tl.full([BLOCK], -2147483648, tl.int32)
    for start in range(0, n, BLOCK):
        s, valid, key = _row_keys(base, start + offs0, n, 1.0)
        kminv = tl.where(valid, tl.minimum(kminv, key), kminv)
        kmaxv = tl.where(valid, tl.maximum(kmaxv, key), kmaxv)
    return tl.min(kminv, 0).to(tl.int64), tl.max(kmaxv, 0).to(tl.int64)


@triton.jit
def _mass_from(base, n, inv_t, m, t, BLOCK: tl.constexpr):
    """Fixed-point exp(s - m) mass of the values at base (n of them) whose key is >= t."""
    offs0 = tl.arange(0, BLOCK)
    zv = tl.zeros([BLOCK], tl.int64)
    for start in range(0, n, BLOCK):
        s, valid, key = _row_keys(base, start + offs0, n, inv_t)
        zv += _fixed(s, m, valid & (key >= t))
    return tl.sum(zv, 0)


@triton.jit
def _topp_target(p, z):
    """Fixed-point top-p target: top_p times the fixed-point mass z (top_p <= 0 keeps the top token)."""
    return _to_fixed(tl.maximum(p * _from_fixed(z), 1e-30))


@triton.jit
def _fast_pick(fastacc_ptr, fastw_s_ptr, fastw_i_ptr, row, p, s_min, R: tl.constexpr):
    """The rejection fast path's token for a top-p row (top-k off), or -1: the first of the R race winners
    whose fixed-point mass strictly above its key is below the top-p target (i.e. it lies in the kept set
    {key >= t}: t is the largest key whose mass at or above reaches the target) and with s >= s_min."""
    rr = tl.arange(0, R)
    z = tl.load(fastacc_ptr + row * (R + 1))
    above = tl.load(fastacc_ptr + row * (R + 1) + 1 + rr)
    sw = tl.load(fastw_s_ptr + row * R + rr)
    iw = tl.load(fastw_i_ptr + row * R + rr)
    ok = (above < _topp_target(p, z)) & (sw >= s_min)
    first = tl.min(tl.where(ok, rr, R), 0)
    return tl.where(first < R, tl.sum(tl.where(rr == first, iw, 0), 0), -1)


@triton.jit
def _find_threshold(base, n, inv_t, m, lo, hi, k, p, z_all, use_k, use_p, WAYS: tl.constexpr, BLOCK: tl.constexpr):
    """Key threshold of the top-k, then top-p set among the n values at base (the whole row).
    z_all: the row's total fixed-point exp(s - m) mass."""
    if use_k:
        lo = _search(base, n, inv_t, m, lo, hi, k.to(tl.int64), False, WAYS, BLOCK)
    if use_p:
        z = z_all
        if use_k:  # top-p renormalises over the top-k set
            z = _mass_from(base, n, inv_t, m, lo, BLOCK)
        lo = _search(base, n, inv_t, m, lo, hi, _topp_target(p, z), True, WAYS, BLOCK)
    return lo
