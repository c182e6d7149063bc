"""Kernels against their references (Triton under the interpreter when there is no GPU), and the
attention reference against a dense causal SDPA oracle."""

import importlib
import math
import os

import pytest
import torch

CUDA = torch.cuda.is_available()
if not CUDA:
    # Triton reads this when it decorates a function (its own library included), so it must be set
    # before triton is first imported; tachyon.kernels sets it itself on CPU-only torch builds.
    os.environ.setdefault("TRITON_INTERPRET", "1")

K = importlib.import_module("tachyon.kernels")
attn_mod = importlib.import_module("tachyon.kernels.attention")


def _interpreter_usable() -> bool:
    """On CPU the whole of Triton (its library functions too) must have been decorated under the
    interpreter, i.e. imported after TRITON_INTERPRET=1 (tachyon.kernels sets it on CPU builds)."""
    if CUDA or not K.HAS_TRITON:
        return K.HAS_TRITON
    import triton.language as tl

    return type(tl.cdiv).__name__ == "InterpretedFunction"
from tachyon.kernels.sampling import GREEDY_EPS  # noqa: E402

DEV = "cuda" if CUDA else "cpu"
needs_triton = pytest.mark.skipif(
    not _interpreter_usable(), reason="triton is not installed, or was imported before TRITON_INTERPRET=1"
)
DTYPES = [torch.float32, torch.bfloat16] if CUDA else [torch.float32]
NAN = float("nan")
# log(0) = -inf of an empty KV split is intended; the interpreter warns about it
pytestmark = pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")


def tol(dtype: torch.dtype) -> dict:
    return {"rtol": 1e-4, "atol": 1e-4} if dtype == torch.float32 else {"rtol": 1e-2, "atol": 1e-2}


@pytest.fixture
def poison(monkeypatch):
    """torch.empty / empty_like hand out NaN-filled (float) or -7-filled (int) memory."""
    real_empty, real_like = torch.empty, torch.empty_like

    def fill(t: torch.Tensor) -> torch.Tensor:
        return t.fill_(NAN if t.is_floating_point() else -7)

    monkeypatch.setattr(torch, "empty", lambda *a, **k: fill(real_empty(*a, **k)))
    monkeypatch.setattr(torch, "empty_like", lambda *a, **k: fill(real_like(*a, **k)))


def close(a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype) -> None:
    assert not torch.isnan(a).any(), "NaN (unwritten or bad) elements"
    torch.testing.assert_close(a.float(), b.float(), **tol(dtype))


# ---------------------------------------------------------------- paged batch construction


def make_batch(specs, Hq, Hkv, D, block_size, dtype, gen, extra_blocks=3):
    """specs: [(cached_len, query_len)]. Returns q, kv_cache, metadata, dense per-seq K/V."""
    blocks_per = [-(-(c + n) // block_size) for c, n in specs]
    num_blocks = sum(blocks_per) + extra_blocks
    perm = torch.randperm(num_blocks, generator=gen)
    kv_cache = torch.randn(2, num_blocks, block_size, Hkv, D, generator=gen).to(dtype)
    max_blk = max(blocks_per)
    block_tables = torch.zeros(len(specs), max_blk, dtype=torch.int32)
    dense, used = [], 0
    for b, (c, n) in enumerate(specs):
        ids = perm[used : used + blocks_per[b]]
        used += blocks_per[b]
        block_tables[b, : len(ids)] = ids.to(torch.int32)
        S = c + n
        slots = ids.repeat_interleave(block_size) * block_size + torch.arange(block_size).repeat(len(ids))
        slots = slots[:S]
        k = torch.randn(S, Hkv, D, generator=gen).to(dtype)
        v = torch.randn(S, Hkv, D, generator=gen).to(dtype)
        kv_cache[0].view(-1, Hkv, D)[slots] = k
        kv_cache[1].view(-1, Hkv, D)[slots] = v
        dense.append((k, v))
    q_lens = [n for _, n in specs]
    qsl = torch.tensor([0] + q_lens, dtype=torch.int32).cumsum(0).to(torch.int32)
    seq_lens = torch.tensor([c + n for c, n in specs], dtype=torch.int32)
    q = torch.randn(int(qsl[-1]), Hq, D, generator=gen).to(dtype)
    meta = dict(
        query_start_loc=qsl.to(DEV), seq_lens=seq_lens.to(DEV), block_tables=block_tables.to(DEV),
        max_query_len=max(q_lens), max_seq_len=int(seq_lens.max()), scale=1.0 / math.sqrt(D),
    )
    return q.to(DEV), kv_cache.to(DEV), meta, dense


def sdpa_oracle(q, dense, specs, Hq, Hkv):
    """Dense causal SDPA per sequence in float64 (causal mask offset by the cached length)."""
    outs, start = [], 0
    for (c, n), (k, v) in zip(specs, dense, strict=True):
        qb = q[start : start + n].double().cpu().permute(1, 0, 2).unsqueeze(0)  # [1, Hq, n, D]
        kb = k.double().repeat_interleave(Hq // Hkv, dim=1).permute(1, 0, 2).unsqueeze(0)
        vb = v.double().repeat_interleave(Hq // Hkv, dim=1).permute(1, 0, 2).unsqueeze(0)
        mask = torch.arange(c + n).unsqueeze(0) <= (c + torch.arange(n)).unsqueeze(1)
        o = torch.nn.functional.scaled_dot_product_attention(qb, kb, vb, attn_mask=mask)
        outs.append(o[0].permute(1, 0, 2))
        start += n
    return torch.cat(outs)


MIXED = [(0, 7), (20, 1), (33, 5), (0, 1), (15, 17), (47, 1), (16, 16), (5, 3)]
DECODE = [(0, 1), (18, 1), (63, 1), (100, 1), (31, 1)]


@pytest.mark.parametrize("Hq,Hkv,D,block_size", [(4, 4, 32, 16), (8, 2, 64, 16), (6, 2, 48, 8)])
def test_attention_ref_matches_sdpa(Hq, Hkv, D, block_size):
    gen = torch.Generator().manual_seed(0)
    q, cache, meta, dense = make_batch(MIXED, Hq, Hkv, D, block_size, torch.float32, gen)
    out = K.attention_ref(q, cache, **meta)
    ref = sdpa_oracle(q, dense, MIXED, Hq, Hkv)
    torch.testing.assert_close(out.double().cpu(), ref, rtol=1e-5, atol=1e-5)


@pytest.fixture(params=["fused", "unfused"])
def attention_split_reduce(request, monkeypatch):
    """Both split-KV reductions: fused into the decode kernel (last program merges) or a second kernel."""
    monkeypatch.setattr(attn_mod, "FUSED_SPLIT_REDUCE", request.param == "fused")
    return request.param


@needs_triton
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("Hq,Hkv,D,splits", [(8, 2, 64, 1), (8, 2, 64, 3), (7, 1, 32, 0), (4, 4, 48, 2)])
def test_attention_decode(poison, attention_split_reduce, dtype, Hq, Hkv, D, splits):
    gen = torch.Generator().manual_seed(1)
    q, cache, meta, _ = make_batch(DECODE, Hq, Hkv, D, 16, dtype, gen)
    out = K.attention_triton(q, cache, **meta, out=torch.full_like(q, NAN), num_kv_splits=splits)
    close(out, K.attention_ref(q, cache, **meta), dtype)


# seq_lens 1, 21, 151, 96, 261: with 8 splits of >= 32 keys (fp32 BLOCK_N) they use 1, 1, 5, 3, 5
# splits, leaving some empty (sequences with one split are written directly by the fused kernel)
SPLIT_DECODE = [(0, 1), (20, 1), (150, 1), (95, 1), (260, 1)]


@needs_triton
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("G", [1, 2, 4, 7])
@pytest.mark.parametrize("mode", ["fused", "fused_1_split_per_merge_step", "unfused"])
def test_attention_decode_kv_splits(poison, monkeypatch, dtype, G, mode):
    """Split-KV decode over sequences of different lengths, GQA groups 1/2/4/7. The fused kernel
    leaves its semaphores at 0, so a second call merges again and bit-identically (fixed order)."""
    monkeypatch.setattr(attn_mod, "FUSED_SPLIT_REDUCE", mode != "unfused")
    if mode == "fused_1_split_per_merge_step":
        monkeypatch.setattr(attn_mod, "COMBINE_ELEMS", 1)
    Hkv, D = 2, 32
    gen = torch.Generator().manual_seed(3)
    q, cache, meta, _ = make_batch(SPLIT_DECODE, G * Hkv, Hkv, D, 16, dtype, gen)
    ref = K.attention_ref(q, cache, **meta)
    first = K.attention_triton(q, cache, **meta, out=torch.full_like(q, NAN), num_kv_splits=8)
    close(first, ref, dtype)
    if mode != "unfused":
        assert not attn_mod._SEMAPHORES[q.device].any(), "semaphores not reset"
        second = K.attention_triton(q, cache, **meta, out=torch.full_like(q, NAN), num_kv_splits=8)
        assert torch.equal(first, second)


@needs_triton
def test_attention_decode_kv_splits_graph_shape(poison, attention_split_reduce):
    """As a CUDA graph launches it: max_seq_len = max_model_len picks many splits, short contexts use
    only their first few (128-key, or 32 in fp32) splits; results match the exact-max_seq_len call."""
    dtype = DTYPES[-1]
    gen = torch.Generator().manual_seed(4)
    q, cache, meta, _ = make_batch(SPLIT_DECODE, 14, 2, 32, 16, dtype, gen)
    ref = K.attention_ref(q, cache, **meta)
    wide = dict(meta, max_seq_len=4096)
    assert attn_mod.choose_kv_splits(len(SPLIT_DECODE), 2, 4096, attn_mod.sm_count(q.device)) > 8
    out = K.attention_triton(q, cache, **wide, out=torch.full_like(q, NAN))
    close(out, ref, dtype)
    close(K.attention_triton(q, cache, **meta, out=torch.full_like(q, NAN)), out, dtype)


@needs_triton
@pytest.mark.parametrize("split_keys", [64, 100, 4096])
def test_attention_decode_runtime_split_keys(poison, attention_split_reduce, monkeypatch, split_keys):
    """A larger minimum split length (fewer, longer splits; one split for every short context) gives
    the same attention as the reference."""
    monkeypatch.setattr(attn_mod, "RUNTIME_SPLIT_KEYS", split_keys)
    dtype = DTYPES[-1]
    gen = torch.Generator().manual_seed(5)
    q, cache, meta, _ = make_batch(SPLIT_DECODE, 8, 2, 32, 16, dtype, gen)
    out = K.attention_triton(q, cache, **dict(meta, max_seq_len=4096), out=torch.full_like(q, NAN))
    close(out, K.attention_ref(q, cache, **meta), dtype)


def test_split_semaphores(monkeypatch):
    """Allocated zeroed once per device, grown by replacement; the old buffer is kept alive."""
    monkeypatch.setattr(attn_mod, "_SEMAPHORES", {})
    monkeypatch.setattr(attn_mod, "_RETIRED_SEMAPHORES", [])
    monkeypatch.setattr(attn_mod, "_MIN_SEMAPHORES", 8)
    dev = torch.device("cpu")
    a = attn_mod.split_semaphores(dev, 3)
    assert a.numel() == 8 and a.dtype == torch.int32 and not a.any()
    assert attn_mod.split_semaphores(dev, 8) is a
    b = attn_mod.split_semaphores(dev, 20)
    assert b.numel() == 20 and not b.any() and attn_mod._RETIRED_SEMAPHORES == [a]
    assert attn_mod.split_semaphores(dev, 5) is b


@needs_triton
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("Hq,Hkv,D,block_size", [(4, 2, 64, 16), (6, 3, 32, 8), (14, 2, 32, 16)])
def test_attention_prefill_mixed(poison, dtype, Hq, Hkv, D, block_size):
    gen = torch.Generator().manual_seed(2)
    specs = MIXED + [(3, 40)]
    q, cache, meta, _ = make_batch(specs, Hq, Hkv, D, block_size, dtype, gen)
    out = K.attention_triton(q, cache, **meta)
    close(out, K.attention_ref(q, cache, **meta), dtype)


def test_choose_kv_splits():
    assert attn_mod.choose_kv_splits(256, 4, 4096, 132) == 1
    assert attn_mod.choose_kv_splits(33, 4, 4096, 132) == 1  # 132 programs fill the GPU
    assert attn_mod.choose_kv_splits(1, 4, 256, 132) == 1  # two splits' worth of keys: not worth a merge
    assert attn_mod.choose_kv_splits(1, 4, 300, 132) == 3  # >= 128 keys per split
    assert 8 <= attn_mod.choose_kv_splits(1, 4, 4096, 132) <= 64
    assert attn_mod.choose_kv_splits(1, 4, 32768, 132) == 64  # the cap
    assert attn_mod.choose_kv_splits(1, 8, 32768, 132) == 33  # ~2 programs per SM


# ---------------------------------------------------------------- store_kv


@pytest.mark.parametrize("impl", ["ref", pytest.param("triton", marks=needs_triton)])
def test_store_kv(impl):
    gen = torch.Generator().manual_seed(3)
    T, H, D, nb, bs = 11, 2, 24, 5, 4
    key = torch.randn(T, H, D, generator=gen).to(DEV)
    value = torch.randn(T, H, D, generator=gen).to(DEV)
    slots = torch.randperm(nb * bs, generator=gen)[:T].to(DEV)
    slots[[2, 7]] = -1
    cache = torch.randn(2, nb, bs, H, D, generator=gen).to(DEV)
    expect = cache.clone()
    for t in range(T):
        s = int(slots[t])
        if s >= 0:
            expect[0, s // bs, s % bs] = key[t]
            expect[1, s // bs, s % bs] = value[t]
    fn = K.store_kv_ref if impl == "ref" else K.store_kv_triton
    fn(key, value, cache, slots)
    assert torch.equal(cache, expect)


# ---------------------------------------------------------------- rmsnorm / rotary / silu


def hf_rmsnorm(x, w, eps):
    dt = x.dtype
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return w * h.to(dt)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("with_res", [False, True])
def test_rmsnorm(poison, dtype, with_res):
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(5, 3, 200, generator=gen).to(DEV, dtype)
    w = (1 + 0.1 * torch.randn(200, generator=gen)).to(DEV, dtype)
    r = torch.randn(5, 3, 200, generator=gen).to(DEV, dtype) if with_res else None
    out_ref, h_ref = K.rmsnorm_ref(x, w, 1e-6, r)
    torch.testing.assert_close(out_ref, hf_rmsnorm(x if r is None else x + r, w, 1e-6), rtol=0, atol=0)
    if _interpreter_usable():
        out, h = K.rmsnorm_triton(x, w, 1e-6, r)
        close(out, out_ref, dtype)
        close(h, h_ref, dtype)


def hf_rope(x, cos, sin):
    half = x.shape[-1] // 2
    rot = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rot * sin


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("D,rot", [(32, 32), (64, 32)])
def test_rotary(dtype, D, rot):
    gen = torch.Generator().manual_seed(5)
    T, Hq, Hkv = 9, 6, 2
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, rot, 2, dtype=torch.float32) / rot))
    cache = K.rope_cos_sin_cache(inv_freq, 64).to(DEV)
    pos = torch.randint(0, 64, (T,), generator=gen).to(DEV)
    q = torch.randn(T, Hq, D, generator=gen).to(DEV, dtype)
    k = torch.randn(T, Hkv, D, generator=gen).to(DEV, dtype)
    # HF: cos/sin from cat(freqs, freqs), cast to the input dtype
    freqs = torch.outer(pos.float().cpu(), inv_freq)
    emb = torch.cat([freqs, freqs], dim=-1)
    cos, sin = emb.cos().to(DEV, dtype)[:, None], emb.sin().to(DEV, dtype)[:, None]
    exp_q = torch.cat([hf_rope(q[..., :rot], cos, sin), q[..., rot:]], -1)
    exp_k = torch.cat([hf_rope(k[..., :rot], cos, sin), k[..., rot:]], -1)
    qr, kr = K.rotary_ref(q.clone(), k.clone(), pos, cache)
    torch.testing.assert_close(qr, exp_q, rtol=0, atol=0)
    torch.testing.assert_close(kr, exp_k, rtol=0, atol=0)
    if _interpreter_usable():
        qt, kt = K.rotary_triton(q.clone(), k.clone(), pos, cache)
        close(qt, qr, dtype)
        close(kt, kr, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_silu_and_mul(poison, dtype):
    gen = torch.Generator().manual_seed(6)
    x = torch.randn(7, 2 * 1100, generator=gen).to(DEV, dtype)
    ref = K.silu_and_mul_ref(x)
    g, u = x.float().chunk(2, -1)
    torch.testing.assert_close(ref.float(), torch.nn.functional.silu(g) * u, **tol(dtype))
    if _interpreter_usable():
        close(K.silu_and_mul_triton(x), ref, dtype)


# ---------------------------------------------------------------- sampling


def row_params(B, T, k=0, p=1.0, mp=0.0, seed0=0):
    return dict(
        temperature=torch.full((B,), T, device=DEV),
        top_k=torch.full((B,), k, dtype=torch.int32, device=DEV),
        top_p=torch.full((B,), p, device=DEV),
        min_p=torch.full((B,), mp, device=DEV),
        seeds=torch.arange(seed0, seed0 + B, dtype=torch.int64, device=DEV),
        steps=torch.zeros(B, dtype=torch.int64, device=DEV),
    )


def expected_probs(logits, T, k, p, mp):
    """The target distribution, spelled out with a full sort (HF order: top-k, top-p, min-p)."""
    s = logits.double() / T
    vals, idx = s.sort(descending=True)
    n = len(vals)
    keep = torch.ones(n, dtype=torch.bool)
    if 0 < k < n:
        keep[k:] = False
    probs = torch.softmax(vals.masked_fill(~keep, -math.inf), 0)
    if p < 1:
        keep &= (probs.cumsum(0) - probs) < p
    if mp > 0:
        keep &= probs >= mp * probs[0]
    probs = torch.softmax(vals.masked_fill(~keep, -math.inf), 0)
    out = torch.zeros(n, dtype=torch.float64)
    out[idx] = probs
    return out


SAMPLE_CASES = [(0.8, 0, 1.0, 0.0), (1.0, 4, 1.0, 0.0), (1.0, 0, 0.7, 0.0), (0.7, 0, 1.0, 0.1),
                (1.3, 6, 0.8, 0.05)]


def draw_ok(tokens, probs, n):
    """Support respected, and a chi-square statistic far from a gross mismatch."""
    counts = torch.bincount(tokens.cpu(), minlength=len(probs)).double()
    assert counts[probs == 0].sum() == 0, "token outside the kept set"
    sup = probs > 0
    e = probs[sup] * n
    chi2 = ((counts[sup] - e) ** 2 / e).sum().item()
    df = max(int(sup.sum()) - 1, 1)
    assert chi2 < df + 8 * math.sqrt(2 * df) + 12, (chi2, df)
    tv = 0.5 * (counts / n - probs).abs().sum().item()
    assert tv < max(0.12, math.sqrt((df + 1) / n)), tv  # (the noise alone is ~0.1 at n = 100)


# the interpreter is slow: on CPU, Triton draws only for the plain and the all-filters case (the
# kept set of every case is checked exactly by test_sampling_kept_set)
TRITON_CASES = SAMPLE_CASES if CUDA else [SAMPLE_CASES[0], SAMPLE_CASES[-1]]


@pytest.mark.parametrize(
    "impl,case",
    [("ref", c) for c in SAMPLE_CASES] + [pytest.param("triton", c, marks=needs_triton) for c in TRITON_CASES],
)
def test_sampling_distribution(case, impl):
    T, k, p, mp = case
    V, n = 12, 100 if impl == "triton" and not CUDA else 4000
    logits = torch.randn(V, generator=torch.Generator().manual_seed(7)) * 1.5
    probs = expected_probs(logits, T, k, p, mp)
    fn = K.sample_ref if impl == "ref" else K.sample_triton
    tokens = fn(logits.to(DEV).expand(n, V).contiguous(), **row_params(n, T, k, p, mp))
    draw_ok(tokens, probs, n)


@needs_triton
@pytest.mark.parametrize("cap", [4096, 8, 3])  # 8: brackets refined; 3: often the whole-row fallback
def test_sampling_kept_set(monkeypatch, cap):
    """The Triton kernel's threshold search keeps exactly the tokens the sort-based definition keeps."""
    sampling = importlib.import_module("tachyon.kernels.sampling")
    monkeypatch.setattr(sampling, "CANDIDATES", cap)
    gen = torch.Generator().manual_seed(10)
    cases = SAMPLE_CASES + [(1.0, 1000, 0.5, 0.0), (0.5, 3, 1.0, 0.2), (2.0, 0, 0.95, 0.0), (1.0, 49, 0.3, 0.0)]
    B, V = len(cases), 50
    logits = torch.randn(B, V, generator=gen) * 2
    logits[1, :5] = logits[1].max() + 1  # 5 tied top tokens, top_k 4: ties are kept together
    params = row_params(B, 1.0)
    for r, (T, k, p, mp) in enumerate(cases):
        params["temperature"][r], params["top_k"][r], params["top_p"][r], params["min_p"][r] = T, k, p, mp
    key_thr = torch.full((B,), -7, dtype=torch.int32, device=DEV)
    s_min = torch.full((B,), NAN, device=DEV)
    sampling.sample_triton(logits.to(DEV), **params, thresholds=(key_thr, s_min))
    key_thr, s_min = key_thr.cpu(), s_min.cpu()
    for r, (T, k, p, mp) in enumerate(cases):
        s = logits[r] * params["temperature"][r].cpu().reciprocal()
        bits = s.view(torch.int32)
        key = torch.where(bits >= 0, bits, bits ^ 0x7FFFFFFF)
        kept = (key >= key_thr[r]) & (s >= s_min[r])
        expect = expected_probs(logits[r], T, k, p, mp) > 0
        if r == 1:  # ties at the top-k boundary keep every token of the boundary value
            assert torch.equal(kept.nonzero().flatten(), torch.arange(5))
        else:
            assert torch.equal(kept, expect), (r, kept.nonzero().flatten(), expect.nonzero().flatten())


def sampling_kept_mask(logits, params, key_thr, s_min):
    """The kept set that sample_triton's thresholds define, per row."""
    s = logits * params["temperature"].cpu().reciprocal()[:, None]
    bits = s.view(torch.int32)
    key = torch.where(bits >= 0, bits, bits ^ 0x7FFFFFFF)
    return (key >= key_thr.cpu()[:, None]) & (s >= s_min.cpu()[:, None])


def sampling_set_rows(params, cases):
    for r, (T, k, p, mp) in enumerate(cases):
        params["temperature"][r], params["top_k"][r], params["top_p"][r], params["min_p"][r] = T, k, p, mp
    return params


@needs_triton
@pytest.mark.parametrize("cap", [4096, 256])
def test_sampling_kept_set_large(monkeypatch, cap):
    """Flat rows whose kept set (up to ~45k tokens) is far larger than the candidate buffer: the
    histogram brackets hold the thresholds (compacted directly when they fit, else refined once), and
    the kept set is exactly the sort-based one."""
    sampling = importlib.import_module("tachyon.kernels.sampling")
    monkeypatch.setattr(sampling, "CANDIDATES", cap)
    monkeypatch.setattr(sampling, "MAX_CHUNKS", 6)  # few programs: the interpreter is slow
    gen = torch.Generator().manual_seed(11)
    V = 50_000
    cases = [(0.7, 0, 0.9, 0.0), (0.7, 0, 0.9, 0.0), (1.0, 30_000, 0.95, 0.0), (1.0, 20_000, 1.0, 0.02)]
    scales = torch.tensor([0.01, 1.0, 1.0, 0.3])
    logits = torch.randn(len(cases), V, generator=gen) * scales[:, None]
    params = sampling_set_rows(row_params(len(cases), 1.0), cases)
    key_thr = torch.full((len(cases),), -7, dtype=torch.int32, device=DEV)
    s_min = torch.full((len(cases),), NAN, device=DEV)
    tokens = sampling.sample_triton(logits.to(DEV), **params, thresholds=(key_thr, s_min)).cpu()
    kept = sampling_kept_mask(logits, params, key_thr, s_min)
    for r, (T, k, p, mp) in enumerate(cases):
        expect = expected_probs(logits[r], T, k, p, mp) > 0
        assert expect.sum() > 4096
        assert torch.equal(kept[r], expect), (r, int(kept[r].sum()), int(expect.sum()))
        assert kept[r, tokens[r]]


@needs_triton
def test_sampling_paths_agree(monkeypatch):
    """Every path (candidates compacted directly, brackets refined, whole-row fallback) and every
    chunking of the vocabulary (i.e. every batch size) give the same kept set and the same token: each
    token's Gumbel score is a function of its row, seed, step and index only, and cross-program
    masses are exact fixed-point sums."""
    sampling = importlib.import_module("tachyon.kernels.sampling")
    monkeypatch.setattr(sampling, "STREAM_BLOCK", 128)  # up to 4 chunks of V = 500
    monkeypatch.setattr(sampling, "HIST_BINS", 32)  # coarse bins: wide brackets
    gen = torch.Generator().manual_seed(12)
    V, seeds_per_row = 500, 3
    cases = [(1.0, 0, 0.9, 0.0), (0.8, 40, 0.9, 0.0), (1.0, 300, 0.95, 0.05), (1.0, 200, 1.0, 0.0)]
    scales = [0.05, 0.5, 1.0, 0.3]
    rows = [(torch.randn(V, generator=gen) * sc, case) for sc, case in zip(scales, cases)]
    logits = torch.stack([x for x, _ in rows for _ in range(seeds_per_row)])
    all_cases = [case for _, case in rows for _ in range(seeds_per_row)]
    params = sampling_set_rows(row_params(len(all_cases), 1.0, seed0=40), all_cases)
    results = []
    # direct in 4 chunks; refined in 1 chunk; refined, or (the last two rows) whole-row fallback, in 2
    for max_chunks, cap in [(4, 4096), (1, 8), (2, 2)]:
        monkeypatch.setattr(sampling, "MAX_CHUNKS", max_chunks)
        monkeypatch.setattr(sampling, "CANDIDATES", cap)
        key_thr = torch.full((len(all_cases),), -7, dtype=torch.int32, device=DEV)
        s_min = torch.full((len(all_cases),), NAN, device=DEV)
        tokens = sampling.sample_triton(logits.to(DEV), **params, thresholds=(key_thr, s_min))
        results.append((tokens.cpu(), key_thr.cpu(), s_min.cpu()))
    kept = sampling_kept_mask(logits, params, *results[0][1:])
    for r, (T, k, p, mp) in enumerate(all_cases):
        assert torch.equal(kept[r], expected_probs(logits[r], T, k, p, mp) > 0), r
        assert kept[r, results[0][0][r]]
    for tokens, key_thr, s_min in results[1:]:  # (a count search may stop at any key between two tokens)
        assert torch.equal(sampling_kept_mask(logits, params, key_thr, s_min), kept)
        assert torch.equal(tokens, results[0][0])


@needs_triton
@pytest.mark.parametrize("max_chunks,cap", [(4, 4096), (1, 8), (2, 2)])
def test_sampling_scratch_in_bounds(monkeypatch, max_chunks, cap):
    """Every scratch buffer sample_triton allocates is surrounded by sentinel guard zones: no kernel
    store may land outside its buffer (the interpreter does not check out-of-bounds pointers, a GPU
    faults or silently corrupts a neighbour), and the sampled tokens are valid vocabulary indices."""
    sampling = importlib.import_module("tachyon.kernels.sampling")
    monkeypatch.setattr(sampling, "STREAM_BLOCK", 128)
    monkeypatch.setattr(sampling, "HIST_BINS", 32)
    monkeypatch.setattr(sampling, "MAX_CHUNKS", max_chunks)
    monkeypatch.setattr(sampling, "CANDIDATES", cap)
    guard, allocs = 1024, []

    def guarded_empty(*size, dtype=None, device=None):
        n = math.prod(size[0] if len(size) == 1 and isinstance(size[0], (tuple, list)) else size)
        sentinel = NAN if dtype.is_floating_point else -123456789
        buf = torch.full((n + 2 * guard,), sentinel, dtype=dtype, device=device)
        allocs.append((buf, n))
        return buf[guard : guard + n].view(*size)

    proxy = type("GuardedTorch", (), {"__getattr__": lambda self, name: getattr(torch, name)})()
    proxy.empty = guarded_empty
    monkeypatch.setattr(sampling, "torch", proxy)
    gen = torch.Generator().manual_seed(12)
    V = 500
    cases = [(1.0, 0, 0.9, 0.0), (0.8, 40, 0.9, 0.0), (1.0, 300, 0.95, 0.05), (1.0, 200, 1.0, 0.0)]
    scales = [0.05, 0.5, 1.0, 0.3]
    logits = torch.stack([torch.randn(V, generator=gen) * sc for sc in scales])
    params = sampling_set_rows(row_params(len(cases), 1.0), cases)
    tokens = sampling.sample_triton(logits.to(DEV), **params).cpu()
    assert len(allocs) >= 4
    for buf, n in allocs:
        for zone in (buf[:guard], buf[guard + n :]):
            intact = zone.isnan() if zone.is_floating_point() else zone == -123456789
            assert bool(intact.all()), (buf.dtype, n)
    assert bool(((tokens >= 0) & (tokens < V)).all()), tokens


@pytest.mark.parametrize("impl", ["ref", pytest.param("triton", marks=needs_triton)])
def test_sampling_greedy_and_top1_exact(impl):
    gen = torch.Generator().manual_seed(8)
    B, V = 6, 1000
    logits = torch.randn(B, V, generator=gen).to(DEV)
    params = row_params(B, 0.9, k=0, p=0.9)
    params["temperature"][:3] = 0.0
    params["temperature"][1] = GREEDY_EPS / 2
    params["top_k"][3:] = 1
    fn = K.sample_ref if impl == "ref" else K.sample_triton
    assert torch.equal(fn(logits, **params), logits.argmax(-1))


@needs_triton
def test_sampling_batch_independent_and_seeded():
    gen = torch.Generator().manual_seed(9)
    B, V = 5, 300
    logits = torch.randn(B, V, generator=gen).to(DEV)
    params = row_params(B, 1.0, k=20, p=0.9, mp=0.01, seed0=100)
    full = K.sample_triton(logits, **params)
    assert torch.equal(full, K.sample_triton(logits, **params))  # deterministic for (seed, step)
    for r in (0, 3):
        one = {name: t[r : r + 1] for name, t in params.items()}
        assert K.sample_triton(logits[r : r + 1], **one)[0] == full[r]
    ref_full = K.sample_ref(logits, **params)
    for r in (1, 4):
        one = {name: t[r : r + 1] for name, t in params.items()}
        assert K.sample_ref(logits[r : r + 1], **one)[0] == ref_full[r]
    plain = row_params(B, 1.0, seed0=100)  # full-entropy rows: another step draws another stream
    first = K.sample_triton(logits, **plain)
    plain["steps"] += 1
    assert not torch.equal(first, K.sample_triton(logits, **plain))


def test_dispatch(monkeypatch):
    x = torch.randn(2, 8)
    assert not K.use_triton(x)
    if CUDA:
        assert K.use_triton(x.cuda()) == K.HAS_TRITON
        monkeypatch.setenv("TACHYON_FORCE_REF", "1")
        assert not K.use_triton(x.cuda())
    out, h = K.rmsnorm(x, torch.ones(8), 1e-6)
    assert h is x and out.shape == x.shape
