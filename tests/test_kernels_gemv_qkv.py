"""The batch-1 qkv GEMV that finishes qkv_post in its epilogue (gemv_qkv_post): the Triton kernel (interpreter
on CPU) against the reference (F.linear / rmsnorm_gemv_ref, then qkv_post_ref), and the model's decode step
through it against the unfused path."""

import pytest
import torch

from tachyon import kernels
from tachyon.kernels.gemv import CONFIGS, FUSED_CONFIGS, gemv_qkv_post_ref, gemv_qkv_post_triton
from tests.kernel_env import CUDA, DEV, DTYPES, interpreter_usable, needs_triton

NUM_BLOCKS, PAGE = 4, 4
EVEN_CONFIGS = [c for c in CONFIGS + FUSED_CONFIGS if c[0] % 2 == 0]


def problem(Hq: int, Hkv: int, D: int, K: int, dtype: torch.dtype, seed: int, norm: bool, res: bool):
    """(gemv_qkv_post args before the cache / slots, the cache: NaN everywhere, as poison)."""
    g = torch.Generator().manual_seed(seed)
    N = (Hq + 2 * Hkv) * D
    x = torch.randn(1, K, generator=g)
    r = torch.randn(1, K, generator=g) if res else None
    nw = 1 + 0.1 * torch.randn(K, generator=g) if norm else None
    w = torch.randn(N, K, generator=g) / K ** 0.5
    b = torch.randn(N, generator=g)
    ang = torch.rand(64, D // 2, generator=g) * 6.28
    cos_sin = torch.cat([ang.cos(), ang.sin()], -1)  # fp32 table, as RotaryEmbedding keeps it
    pos = torch.tensor([37])
    args = [t.to(dtype).to(DEV) if t is not None else None for t in (x, r, nw)]
    cache = torch.full((2, NUM_BLOCKS, PAGE, Hkv, D), float("nan"), dtype=dtype, device=DEV)
    return args, w.to(dtype).to(DEV), b.to(dtype).to(DEV), cos_sin.to(DEV), pos.to(DEV), cache


def run(fn, args, w, b, cfg, cos_sin, pos, cache, slot, Hq, Hkv, D):
    x, r, nw = args
    q, h = fn(x, r, nw, 1e-6, w, b, cfg, pos, cos_sin, cache, torch.tensor([slot], device=DEV), Hq, Hkv, D)
    return q.float().cpu(), h.float().cpu(), cache.float().cpu()


@needs_triton
@pytest.mark.parametrize("config", EVEN_CONFIGS, ids=str)
@pytest.mark.parametrize("Hq,Hkv,D", [(4, 2, 16), (3, 1, 8), (2, 1, 32)])
@pytest.mark.parametrize("prologue", ["none", "norm", "norm+res"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gemv_qkv_post_matches_reference(config, Hq, Hkv, D, prologue, dtype, poison):
    """q, the residual stream and the token's K / V slot match; no other cache element is touched
    (NaN-poisoned cache and outputs). (3, 1, 8) has 20 pairs: the last program of 8 pairs is partial."""
    norm, res = prologue != "none", prologue == "norm+res"
    args, w, b, cos_sin, pos, cache = problem(Hq, Hkv, D, 96, dtype, Hq * 100 + D, norm, res)
    slot = 9
    q, h, c = run(gemv_qkv_post_triton, args, w, b, config, cos_sin, pos, cache.clone(), slot, Hq, Hkv, D)
    q_ref, h_ref, c_ref = run(gemv_qkv_post_ref, args, w, b, config, cos_sin, pos, cache.clone(), slot, Hq, Hkv, D)
    assert q.shape == (1, Hq, D) and not torch.isnan(q).any()
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(q, q_ref, **tol)
    torch.testing.assert_close(h, h_ref, **tol)
    kv = c.view(2, -1, Hkv, D)
    kv_ref = c_ref.view(2, -1, Hkv, D)
    assert not torch.isnan(kv[:, slot]).any()
    torch.testing.assert_close(kv[:, slot], kv_ref[:, slot], **tol)
    others = torch.ones(kv.shape[1], dtype=torch.bool)
    others[slot] = False
    assert torch.isnan(kv[:, others]).all(), "the kernel wrote outside the token's slot"


@needs_triton
def test_gemv_qkv_post_skips_padding_slot():
    """slot -1 (a padding row of a graph bucket): q is written, the cache not at all."""
    args, w, b, cos_sin, pos, cache = problem(4, 2, 16, 64, torch.float32, 3, False, False)
    q, _, c = run(gemv_qkv_post_triton, args, w, b, CONFIGS[1], cos_sin, pos, cache, -1, 4, 2, 16)
    q_ref, _, _ = run(gemv_qkv_post_ref, args, w, b, CONFIGS[1], cos_sin, pos, cache.clone(), -1, 4, 2, 16)
    torch.testing.assert_close(q, q_ref, rtol=1e-4, atol=1e-4)
    assert torch.isnan(c).all()


@needs_triton
def test_gemv_qkv_post_rotates_like_the_unfused_sequence():
    """Against an independent oracle: F.linear, then q/k rotated by hand with the cos|sin row of the
    position (rotate_half), V copied (fp32, so no rounding differences)."""
    Hq, Hkv, D = 2, 1, 8
    args, w, b, cos_sin, pos, cache = problem(Hq, Hkv, D, 40, torch.float32, 11, False, False)
    q, _, c = run(gemv_qkv_post_triton, args, w, b, CONFIGS[1], cos_sin, pos, cache, 2, Hq, Hkv, D)
    qkv = (args[0] @ w.T + b).cpu().view(Hq + 2 * Hkv, D)
    cs = cos_sin[int(pos)].cpu()
    cos, sin = cs[: D // 2].repeat(2), cs[D // 2:].repeat(2)
    rot = qkv * cos + torch.cat([-qkv[:, D // 2:], qkv[:, : D // 2]], -1) * sin
    torch.testing.assert_close(q[0], rot[:Hq], rtol=1e-5, atol=1e-5)
    kv = c.view(2, -1, Hkv, D)[:, 2]
    torch.testing.assert_close(kv[0], rot[Hq:Hq + Hkv], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(kv[1], qkv[Hq + Hkv:], rtol=1e-5, atol=1e-5)


def _decode_step(model, spec, cache_init, use_configs, fused_norm):
    """One batch-1 decode step at position 3 over a random 3-token cached prefix -> (hidden, caches)."""
    from tachyon.engine.batch import AttentionMetadata
    from tachyon.models.layers import Linear

    caches = [c.clone() for c in cache_init]
    model.bind_kv_cache(caches)
    for m in model.modules():
        if isinstance(m, Linear):
            m.gemv_config = CONFIGS[1] if use_configs else None
            m.fused_config = FUSED_CONFIGS[0] if use_configs and fused_norm and m.prologue == "rmsnorm" else None
    meta = AttentionMetadata(torch.tensor([0, 1], dtype=torch.int32), torch.tensor([4], dtype=torch.int32),
                             torch.tensor([3]), torch.zeros(1, 2, dtype=torch.int32), 1, 4, True)
    with torch.inference_mode():
        hidden = model(torch.tensor([7]), torch.tensor([3]), meta)
    model.bind_kv_cache([])
    return hidden, caches


@pytest.mark.parametrize("arch", ["tiny_qwen2", "tiny_llama"])
@pytest.mark.parametrize("fused_norm", [False, True])
@pytest.mark.parametrize("kernel", ["dispatch", "triton"])
def test_model_decode_step_through_gemv_qkv_post(arch, fused_norm, kernel, request, monkeypatch):
    """The model's batch-1 decode step with the qkv epilogue path (configs set as tune_gemv would) gives
    the hidden states and KV caches of the unfused path (configs unset). "dispatch": the package's
    dispatcher (the reference on CPU) checks the wiring alone; "triton": the kernel itself under the
    interpreter. With TACHYON_QKV_POST_GEMV=0 the path is not taken (a spy counts the calls)."""
    from tachyon.models.loader import load_model, resolve_model

    if kernel == "triton" and (CUDA or not interpreter_usable()):
        pytest.skip("the kernel on CPU tensors needs Triton's interpreter (GPU: the kernel tests above)")
    model, spec = load_model(resolve_model(request.getfixturevalue(arch)), dtype=torch.float32,
                             device=torch.device("cpu"))
    gen = torch.Generator().manual_seed(5)
    cache_init = [torch.randn(2, 2, 4, spec.num_kv_heads, spec.head_dim, generator=gen)
                  for _ in range(spec.num_layers)]
    base, base_caches = _decode_step(model, spec, cache_init, False, False)
    calls = []
    real = gemv_qkv_post_triton if kernel == "triton" else kernels.gemv_qkv_post

    def spy(*a):
        calls.append(1)
        return real(*a)

    monkeypatch.setattr(kernels, "gemv_qkv_post", spy)
    fused, fused_caches = _decode_step(model, spec, cache_init, True, fused_norm)
    assert len(calls) == spec.num_layers
    tol = dict(rtol=0, atol=0) if kernel == "dispatch" else dict(rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(fused, base, **tol)
    for got, want in zip(fused_caches, base_caches):
        torch.testing.assert_close(got, want, **tol)
    monkeypatch.setenv("TACHYON_QKV_POST_GEMV", "0")
    _decode_step(model, spec, cache_init, True, fused_norm)
    assert len(calls) == spec.num_layers


@needs_triton
@pytest.mark.parametrize("config", EVEN_CONFIGS[:2], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gemv_qkv_post_rounds_like_the_triton_pair(config, dtype):
    """The same roundings as the two kernels it replaces (gemv_triton, then qkv_post_triton). Under the
    interpreter q and the cache are bit for bit equal; compiled, the two kernels may reduce a row's products
    in another order, so fp32 agrees to 1e-5 and bf16 to one rounding step of the output."""
    Hq, Hkv, D = 4, 2, 16
    args, w, b, cos_sin, pos, cache = problem(Hq, Hkv, D, 96, dtype, 21, False, False)
    slots = torch.tensor([6], device=DEV)
    pair_cache = cache.clone()
    qkv = kernels.gemv_triton(args[0], w, b, config)
    q_pair = kernels.qkv_post_triton(qkv, pos, cos_sin, pair_cache, slots, None, None, 0.0, Hq, Hkv, D)
    q, _ = gemv_qkv_post_triton(args[0], None, None, 0.0, w, b, config, pos, cos_sin, cache, slots, Hq, Hkv, D)
    got = torch.cat([q.view(-1), cache.nan_to_num(7.0).view(-1)]).float()
    want = torch.cat([q_pair.view(-1), pair_cache.nan_to_num(7.0).view(-1)]).float()
    if not CUDA:
        assert torch.equal(got, want)
    elif dtype == torch.float32:
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    else:  # a bf16 step of the value, or of the two rotary products whose difference it is (cancellation)
        step = torch.maximum(torch.maximum(got.abs(), want.abs()) * 2**-7, want.abs().max() * 2**-6)
        assert ((got - want).abs() <= step).all()
