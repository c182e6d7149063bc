"""The sampler: the reference and the Triton kernels against an independent filtered-softmax oracle
(frequencies) and each other (batch sizes, seeds, greedy and unfiltered rows); the Triton kept set and
its paths are in test_kernels_sampling_kept.py."""

import importlib

import pytest
import torch

from tachyon.kernels._triton import tl, triton
from tachyon.kernels.sampling import GREEDY_EPS
from tachyon.kernels.sampling_device import _gumbel_fast
from tests.kernel_env import CUDA, DEV, K, needs_triton
from tests.sampling_oracle import SAMPLE_CASES, draw_ok, expected_probs, row_params

# the interpreter is slow: on CPU, Triton draws only for the plain, the top-p (the rejection fast path)
# and the all-filters case (the kept set of every case is checked exactly by test_kernels_sampling_kept.py)
TRITON_CASES = SAMPLE_CASES if CUDA else [SAMPLE_CASES[0], SAMPLE_CASES[2], SAMPLE_CASES[-1]]


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


@pytest.mark.parametrize("prefixes", [(1,), (3,), (6,), (11,), (1, 6), (2, 3), (1, 2)])
@pytest.mark.parametrize("case", [(1.0, 0, 0.7, 0.0), (0.6, 0, 0.9, 0.0), (1.0, 0, 0.5, 0.3), (2.0, 0, 0.95, 0.0)])
def test_sampling_ref_top_p_prefix(monkeypatch, case, prefixes):
    """The reference sorts only the top n tokens of a top-p row, the first n of REF_TOP_P_PREFIXES whose mass
    reaches top_p, else the whole row: the draws follow the full-sort oracle either way."""
    sampling = importlib.import_module("tachyon.kernels.sampling")
    monkeypatch.setattr(sampling, "REF_TOP_P_PREFIXES", prefixes)
    T, k, p, mp = case
    V, n = 12, 3000
    logits = torch.randn(V, generator=torch.Generator().manual_seed(7)) * 1.5
    probs = expected_probs(logits, T, k, p, mp)
    s = logits.float() / T
    sorted_probs = torch.softmax(s, 0).sort(descending=True).values
    _, idx, _ = sampling._top_p_prefix(s, p)
    held = [n for n in prefixes if n < V and float(sorted_probs[:n].sum()) >= p + 1e-6]
    assert len(idx) == (held[0] if held else V)
    tokens = K.sample_ref(logits.expand(n, V).contiguous(), **{k_: v.cpu() for k_, v in
                                                                 row_params(n, T, k, p, mp).items()})
    draw_ok(tokens, probs, n)


FAST_CASES = [(4, 0.69, 0.0), (1, 0.08, 0.0), (1, 0.71, 0.0), (2, 0.93, 0.12)]


@needs_triton
@pytest.mark.parametrize("races,p,mp", FAST_CASES if CUDA else FAST_CASES[:2])  # the interpreter is slow
def test_sampling_fast_path_distribution(monkeypatch, races, p, mp):
    """Top-p rows without top-k take the rejection fast path: the first of R extra race winners that lies
    in the kept set, else the exact search. The draws follow the filtered softmax either way: p 0.08 with
    one race falls back on most rows, p 0.69 / 0.71 put the threshold next to a token with ~10% of the mass
    on either side (a > / >= slip in the membership test shows), min-p cuts the tail as well."""
    sampling = importlib.import_module("tachyon.kernels.sampling")
    monkeypatch.setattr(sampling, "FAST_RACES", races)
    probs0 = torch.tensor([0.4, 0.2, 0.1, 0.08, 0.07, 0.05, 0.04, 0.03, 0.02, 0.01])
    logits = probs0.log()[torch.randperm(10, generator=torch.Generator().manual_seed(3))]
    # on CPU (the interpreter runs rows one by one) fewer draws still catch what the test is for: at p 0.08
    # only the top token is kept, so one stray draw fails, and ~60% of 60 rows fall back; at p 0.69 a slip
    # that keeps the 4th token would draw it ~15 times in 150 rows (missed with probability ~1e-7)
    n = 2000 if CUDA else (60 if p < 0.1 else 150)
    probs = expected_probs(logits, 1.0, 0, p, mp)
    tokens = sampling.sample_triton(logits.to(DEV).expand(n, 10).contiguous(), **row_params(n, 1.0, 0, p, mp))
    draw_ok(tokens, probs, n)
    counts = torch.bincount(tokens.cpu(), minlength=10)
    assert bool((counts[probs * n >= 20] > 0).all()), (counts, probs)  # no kept token is never drawn


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


# (temperature, top_k, top_p, min_p) of one row, and whether it is greedy or unfiltered; V = 300 below
ROW_CLASSES = [((0.0, 0, 0.5, 0.3), True), ((GREEDY_EPS / 2, 50, 1.0, 0.0), True), ((0.9, 1, 0.5, 0.2), True),
               ((0.9, 0, 1.0, 0.0), True), ((1.3, 300, 1.0, 0.0), True), ((0.9, -1, 1.0, 0.0), True),
               ((0.9, 2, 1.0, 0.0), False), ((0.9, 299, 1.0, 0.0), False), ((0.9, 0, 0.999, 0.0), False),
               ((0.9, 0, 1.0, 1e-6), False), ((2 * GREEDY_EPS, 0, 0.5, 0.0), False)]


@pytest.mark.parametrize("row,expected", ROW_CLASSES)
def test_row_is_unfiltered_classes(row, expected):
    """The host's class of a row (which decode graph may skip the filter kernels) is the kernels' one:
    greedy (T < GREEDY_EPS or top_k == 1) or no top-k (<= 0 or >= V), top-p (>= 1) or min-p (<= 0) filter."""
    sampling = importlib.import_module("tachyon.kernels.sampling")
    assert sampling.row_is_unfiltered(*row, vocab_size=300) is expected


@needs_triton
def test_unfiltered_launch_same_tokens(poison):
    """Greedy and unfiltered rows (the classes above, seeded, several steps): the reduced launch
    (unfiltered=True: stats and finish only) gives the full launch's tokens, bit for bit."""
    gen = torch.Generator().manual_seed(12)
    rows = [r for r, unfiltered in ROW_CLASSES if unfiltered]
    B, V = len(rows), 300
    logits = torch.randn(B, V, generator=gen).to(DEV)
    params = dict(
        temperature=torch.tensor([r[0] for r in rows], device=DEV),
        top_k=torch.tensor([r[1] for r in rows], dtype=torch.int32, device=DEV),
        top_p=torch.tensor([r[2] for r in rows], device=DEV),
        min_p=torch.tensor([r[3] for r in rows], device=DEV),
        seeds=torch.arange(40, 40 + B, dtype=torch.int64, device=DEV),
        steps=torch.zeros(B, dtype=torch.int64, device=DEV),
    )
    for step in range(3):
        params["steps"].fill_(step)
        full = K.sample_triton(logits, **params)
        reduced = K.sample_triton(logits, **params, out=torch.full((B,), -7, dtype=torch.int64, device=DEV),
                                  unfiltered=True)
        assert torch.equal(reduced, full)
        assert torch.equal(reduced[:3], logits[:3].argmax(-1))  # the greedy rows


@needs_triton
@pytest.mark.parametrize("k,p,mp", [(20, 0.9, 0.01), (0, 0.9, 0.0)])  # the exact search; the fast path
def test_sampling_batch_independent_and_seeded(k, p, mp):
    gen = torch.Generator().manual_seed(9)
    B, V = 5, 300
    logits = torch.randn(B, V, generator=gen).to(DEV)
    params = row_params(B, 1.0, k=k, p=p, mp=mp, seed0=100)
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


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
def test_scratch_segments_start_16_byte_aligned(dtype):
    """Triton specialises pointer arguments on 16-byte alignment: scratch segments must be aligned whatever
    the batch size, or an unusual B compiles another kernel variant in the middle of serving."""
    sampling = importlib.import_module("tachyon.kernels.sampling")
    sizes = [2 * 13 * 41, 13 * 41, 8 * 13, 3, 13 * 4096]
    segs = sampling._aligned_split(dtype, sizes, torch.device("cpu"))
    assert [s.numel() for s in segs] == sizes
    assert all(s.data_ptr() % 16 == 0 for s in segs)
    base = segs[0].data_ptr()
    assert [s.data_ptr() - base for s in segs] == sorted(s.data_ptr() - base for s in segs), "no overlap, in order"
    for a, b in zip(segs, segs[1:]):
        assert a.data_ptr() + a.numel() * a.element_size() <= b.data_ptr()


@pytest.mark.parametrize("impl", ["ref", pytest.param("triton", marks=needs_triton), "dispatch"])
def test_sampling_writes_into_out(impl):
    """`out` (here a view of a larger buffer, as the decode graph passes last_tokens[:B]) receives the same
    tokens as a run without it, is the tensor returned, and nothing past it is written."""
    gen = torch.Generator().manual_seed(10)
    B, V = 5, 300
    logits = torch.randn(B, V, generator=gen).to(DEV)
    params = row_params(B, 1.0, k=20, p=0.9, seed0=40)
    params["temperature"][0] = 0.0  # a greedy row too
    fn = {"ref": K.sample_ref, "triton": K.sample_triton, "dispatch": K.sample}[impl]
    want = fn(logits, **params)
    buf = torch.full((B + 3,), -123456789, dtype=torch.int64, device=DEV)
    out = buf[:B]
    got = fn(logits, **params, out=out)
    assert got is out
    assert torch.equal(out, want)
    assert bool((buf[B:] == -123456789).all())


@triton.jit
def _gumbel_probe(r_ptr, u_ptr, g_ptr, N: tl.constexpr, FAST: tl.constexpr):
    """u (the uniform a philox word maps to) and _gumbel_fast's score for s = 0, for N words."""
    i = tl.arange(0, N)
    r = tl.load(r_ptr + i).to(tl.uint32)
    tl.store(u_ptr + i, tl.maximum(tl.uint_to_uniform_float(r), 1e-30))
    tl.store(g_ptr + i, _gumbel_fast(tl.zeros([N], tl.float32), r, FAST))


@needs_triton
def test_fast_gumbel_matches_exact_noise():
    """The extra races' Gumbel noise (SFU logarithms on the GPU, tl.log2 under the interpreter, and the
    atanh series for u > 3/4) against -log(-log u) in float64 from the same u: words spread over the whole
    range plus the extremes (u -> 0, u -> 1, where -log u is tiny and a plain approximate log would be
    wrong by orders of magnitude)."""
    gen = torch.Generator().manual_seed(0)
    edge = [0, 1, 2, 255, 2**31 - 1, 2**31, 2**31 + 1, 2**32 - 1, 2**32 - 2, 2**32 - 256, 2**32 - 2**20, 3 * 2**30]
    words = torch.cat([torch.tensor(edge), torch.randint(0, 2**32, (4096 - len(edge),), generator=gen)])
    r = words.to(torch.int64).to(DEV)  # the kernel takes the low 32 bits
    u = torch.empty(4096, device=DEV)
    g = torch.empty(4096, device=DEV)
    _gumbel_probe[(1,)](r, u, g, N=4096, FAST=CUDA)
    exact = -torch.log(-torch.log(u.cpu().double()))
    err = (g.cpu().double() - exact).abs()
    assert torch.isfinite(g).all() and err.max().item() < 2e-6, (err.max().item(), u.cpu()[err.argmax()].item())
    assert (u.cpu() > 0.75).sum() > 900 and u.cpu().max().item() > 1 - 1e-6  # both branches, and the u -> 1 end


@pytest.mark.skipif(not CUDA, reason="stream syncs exist on CUDA only")
def test_launched_redraw_never_waits_for_the_stream():
    """Sampler.redraw (a launched decode step's rows with a bias, penalties, a min_tokens ban), apply_bitmask (a
    structured row's mask) and a launched step's logprobs enqueue their work without a host-stream sync: under
    torch's sync debug mode "error" a blocking copy, a list index copied to the device or an .item() raises. The
    draws respect the ban and the mask; the ranks copied back match the logits."""
    from tachyon.engine.request import Request
    from tachyon.engine.sampler import Sampler, logprobs_on_device
    from tachyon.engine.structured import apply_bitmask
    from tachyon.sampling import SamplingParams

    V, n = 1000, 4
    logits = torch.randn(n, V, device="cuda")
    reqs = []
    for i in range(n):
        sp = SamplingParams(temperature=0.8 if i % 2 else 0.0, top_p=0.9, seed=i, logit_bias={5: 2.0},
                            presence_penalty=0.3, repetition_penalty=1.2, min_tokens=3, max_tokens=8)
        r = Request(f"r{i}", [1, 2, 3], sp, eos_token_ids=[0], max_model_len=64, sample_seed=i)
        r.append_token(7)
        r.add_placeholder()  # this draw, pending
        reqs.append(r)
    out = torch.full((n + 1,), -1, dtype=torch.int64, device="cuda")
    sampler = Sampler()
    sampler.redraw(logits, [0, 1], reqs[:2], out)  # warm-up: allocator blocks, Triton compiles
    bitmask = torch.zeros(2, (V + 31) // 32, dtype=torch.int32)
    bitmask[:, 0] = 0b1110  # tokens 1-3 only
    masked = logits.clone()
    apply_bitmask(masked, [1, 2], bitmask)
    torch.cuda.synchronize()
    drawn = torch.tensor([0, 1], device="cuda")  # the warm-up's rows: out[3] is still -1, not a token
    logprobs_on_device(logits.index_select(0, drawn), out.index_select(0, drawn), 3)  # warm-up
    idx = torch.tensor([0, 3], device="cuda")
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        sampler.redraw(logits, [0, 1, 3], [reqs[0], reqs[1], reqs[3]], out)
        apply_bitmask(masked, [1, 2], bitmask)
        lps = logprobs_on_device(logits.index_select(0, idx), out.index_select(0, idx), 3)  # a launched step's
        host = tuple(torch.empty(t.shape, dtype=t.dtype, pin_memory=True) for t in lps)  # logprobs (finish_launch)
        for h, t in zip(host, lps):
            h.copy_(t, non_blocking=True)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    torch.cuda.synchronize()
    drawn = out.tolist()  # log-softmax keeps the logits' order: the ranks are the raw logits' ones
    assert host[1].tolist() == [int((logits[i] > logits[i, drawn[i]]).sum()) + 1 for i in (0, 3)]
    got = out.tolist()
    assert all(0 < t < V for t in (got[0], got[1], got[3])) and got[2] == -1
    assert torch.isinf(masked[1:3, 4:]).all() and torch.isfinite(masked[1:3, 1:4]).all()
