"""The element-wise kernels (KV store, RMSNorm, rotary, SiLU-and-mul) against their references and HF's formulas,
the dispatcher, and the compile-only launch context (Triton under the interpreter when there is no GPU)."""

import pytest
import torch

from tests.kernel_env import CUDA, DEV, DTYPES, K, close, interpreter_usable, needs_triton, tol

# ---------------------------------------------------------------- store_kv


@pytest.mark.parametrize("impl,strided", [("ref", False), ("ref", True), pytest.param("triton", False,
                                                                                  marks=needs_triton)])
@pytest.mark.parametrize("skip", [True, False])
def test_store_kv(impl, strided, skip):
    """Slots -1 skipped; the reference also into a cache view with strides (its index_put branch)."""
    gen = torch.Generator().manual_seed(3)
    T, H, D, nb, bs = 11, 2, 24, 5, 4
    key = torch.randn(T, H, D, generator=gen).to(DEV)
    value = torch.randn(T, H, D, generator=gen).to(DEV)
    slots = torch.randperm(nb * bs, generator=gen)[:T].to(DEV)
    if skip:
        slots[[2, 7]] = -1
    cache = torch.randn(2, nb, bs, H, D + 8 * strided, generator=gen).to(DEV)[..., :D]
    assert cache.is_contiguous() != strided
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
    if interpreter_usable():
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
    if interpreter_usable():
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
    if interpreter_usable():
        close(K.silu_and_mul_triton(x), ref, dtype)


def test_dispatch(monkeypatch):
    x = torch.randn(2, 8)
    assert not K.use_triton(x)
    if CUDA:
        assert K.use_triton(x.cuda()) == K.HAS_TRITON
        monkeypatch.setenv("TACHYON_FORCE_REF", "1")
        assert not K.use_triton(x.cuda())
    out, h = K.rmsnorm(x, torch.ones(8), 1e-6)
    assert h is x and out.shape == x.shape


def test_compile_only_is_a_no_op_without_cuda_or_when_disabled(monkeypatch):
    """Off the GPU (and with TACHYON_PARALLEL_COMPILE=0) launches inside compile_only run normally."""
    from tachyon.kernels.precompile import compile_only

    with compile_only(torch.device("cpu")) as compiling:
        assert not compiling
    if CUDA:
        monkeypatch.setenv("TACHYON_PARALLEL_COMPILE", "0")
        with compile_only(torch.device("cuda")) as compiling:
            assert not compiling


@pytest.mark.skipif(not CUDA, reason="needs a GPU")
def test_compile_only_compiles_without_running():
    """On the GPU: inside compile_only a launch writes nothing (it only compiles); after the context the
    same launch runs from the cache and writes what the reference writes."""
    from tachyon.kernels.precompile import compile_only

    T, H, D = 5, 3, 80  # odd head count and size: a fresh specialisation
    k, v = torch.randn(T, H, D, device=DEV), torch.randn(T, H, D, device=DEV)
    cache = torch.zeros(2, 4, 16, H, D, device=DEV)
    slots = torch.tensor([0, 17, -1, 40, 63], device=DEV)
    with compile_only(torch.device(DEV)) as compiling:
        assert compiling
        K.store_kv_triton(k, v, cache, slots)
    torch.cuda.synchronize()
    assert not cache.any(), "a launch inside compile_only ran"
    ref = torch.zeros_like(cache)
    K.store_kv_ref(k, v, ref, slots)
    K.store_kv_triton(k, v, cache, slots)
    assert torch.equal(cache, ref)
