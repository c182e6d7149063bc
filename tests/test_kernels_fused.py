"""qkv_post (q/k norm + rotary + KV store in one kernel) against its reference, and the reference
against the separate sequence it replaces (bit for bit). Triton runs under the interpreter on CPU."""

import pytest
import torch

from tests.kernel_env import CUDA, DEV, NAN, K, needs_triton

# name -> (Hq, Hkv, D, rot_dim, qk_norm); small stand-ins for the real families
CONFIGS = {
    "llama": (4, 2, 32, 32, False),  # GQA 2, no q/k norm
    "qwen2": (7, 1, 32, 32, False),  # GQA 7 (Qwen2.5-7B's ratio), a non-power-of-two head count
    "qwen3": (4, 2, 64, 64, True),  # q/k norm, head_dim 64 != hidden / heads
    "partial-rot": (3, 1, 48, 16, True),  # D not a power of two, rotary on the first 16 features
}


def make_case(name: str, dtype: torch.dtype, T: int = 9, seed: int = 0) -> dict:
    """Random inputs; two rows skip the store (slot -1); the target slots of the cache hold NaN."""
    Hq, Hkv, D, rot, qk_norm = CONFIGS[name]
    gen = torch.Generator().manual_seed(seed)
    nb, bs, max_pos = 5, 4, 64
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, rot, 2, dtype=torch.float32) / rot))
    slots = torch.randperm(nb * bs, generator=gen)[:T]
    slots[[1, T - 2]] = -1
    cache = torch.randn(2, nb, bs, Hkv, D, generator=gen)
    for s in slots[slots >= 0].tolist():
        cache[:, s // bs, s % bs] = NAN  # unwritten elements of a stored slot stay NaN
    weights = [(1 + 0.2 * torch.randn(D, generator=gen)).to(DEV, dtype) for _ in range(2)] if qk_norm else [None] * 2
    return dict(
        qkv=(3 * torch.randn(T, (Hq + 2 * Hkv) * D, generator=gen)).to(DEV, dtype),
        positions=torch.randint(0, max_pos, (T,), generator=gen).to(DEV),
        cos_sin_cache=K.rope_cos_sin_cache(inv_freq, max_pos).to(DEV),
        kv_cache=cache.to(DEV, dtype),
        slot_mapping=slots.to(DEV),
        q_norm_weight=weights[0],
        k_norm_weight=weights[1],
        eps=1e-6,
        num_heads=Hq,
        num_kv_heads=Hkv,
        head_dim=D,
    )


def run(fn, case: dict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(q, cache after, qkv after) of one call on fresh copies of the case's tensors."""
    args = dict(case, qkv=case["qkv"].clone(), kv_cache=case["kv_cache"].clone())
    q = fn(**args)
    return q, args["kv_cache"], args["qkv"]


def old_sequence(case: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """What Attention.forward ran before the fusion: split views, q/k norm, rotary, store."""
    qkv, cache = case["qkv"].clone(), case["kv_cache"].clone()
    Hq, Hkv, D = case["num_heads"], case["num_kv_heads"], case["head_dim"]
    t = qkv.shape[0]
    q, k, v = qkv.split([Hq * D, Hkv * D, Hkv * D], dim=-1)
    q, k, v = q.reshape(t, Hq, D), k.reshape(t, Hkv, D), v.reshape(t, Hkv, D)
    if case["q_norm_weight"] is not None:
        q = K.rmsnorm_ref(q, case["q_norm_weight"], case["eps"])[0]
        k = K.rmsnorm_ref(k, case["k_norm_weight"], case["eps"])[0]
    q, k = K.rotary_ref(q, k, case["positions"], case["cos_sin_cache"])
    K.store_kv_ref(k, v, cache, case["slot_mapping"])
    return q, cache


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


def check_cache(cache: torch.Tensor, expect: torch.Tensor, case: dict, atol: float) -> None:
    """Slots never stored (slot -1 rows included) are bit-identical to before; stored ones match."""
    flat, exp_flat = cache.flatten(1, 2), expect.flatten(1, 2)  # [2, slots, Hkv, D]
    before = case["kv_cache"].flatten(1, 2)
    stored = torch.zeros(flat.shape[1], dtype=torch.bool, device=cache.device)
    slots = case["slot_mapping"]
    stored[slots[slots >= 0]] = True
    assert torch.equal(flat[:, ~stored], before[:, ~stored]), "a slot outside slot_mapping changed"
    assert not torch.isnan(flat[:, stored]).any(), "unwritten K/V elements in a stored slot"
    torch.testing.assert_close(flat[:, stored].float(), exp_flat[:, stored].float(), rtol=atol, atol=atol)


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_ref_equals_old_sequence(poison, name, dtype):
    case = make_case(name, dtype)
    q_old, cache_old = old_sequence(case)
    q, cache, qkv_after = run(K.qkv_post_ref, case)
    assert q.is_contiguous() and q.shape == (9, case["num_heads"], case["head_dim"])
    assert torch.equal(q, q_old)
    assert torch.equal(cache, cache_old)
    assert torch.equal(qkv_after, case["qkv"]), "qkv must not be modified"


@needs_triton
@pytest.mark.parametrize("name", list(CONFIGS))
def test_triton_fp32(poison, name):
    case = make_case(name, torch.float32)
    q_ref, cache_ref, _ = run(K.qkv_post_ref, case)
    q, cache, qkv_after = run(K.qkv_post_triton, case)
    assert q.is_contiguous() and q.dtype == torch.float32
    assert not torch.isnan(q).any(), "unwritten q elements"
    torch.testing.assert_close(q, q_ref, rtol=1e-5, atol=1e-5)
    check_cache(cache, cache_ref, case, atol=1e-5)
    assert torch.equal(qkv_after, case["qkv"]), "qkv must not be modified"


@needs_triton
@pytest.mark.parametrize("name", list(CONFIGS))
def test_triton_bf16(poison, name):
    """bf16 in, bf16 out. The interpreter truncates fp32 -> bf16 instead of rounding, so on CPU the
    kernel is held to a looser relative error against the reference, and to bit-equality with the
    separate Triton kernels it replaces (which share the interpreter's rounding)."""
    case = make_case(name, torch.bfloat16)
    q_ref, cache_ref, _ = run(K.qkv_post_ref, case)
    q, cache, qkv_after = run(K.qkv_post_triton, case)
    assert q.dtype == torch.bfloat16 and not torch.isnan(q).any()
    assert torch.equal(qkv_after, case["qkv"]), "qkv must not be modified"
    bound = 1e-2 if CUDA else 3e-2
    check_cache(cache, cache_ref, case, atol=0.25)
    bs = cache.shape[2]
    stored = case["slot_mapping"] >= 0
    slots = case["slot_mapping"][stored]
    k_out, v_out = cache[0, slots // bs, slots % bs], cache[1, slots // bs, slots % bs]
    assert rel_err(q, q_ref) <= bound
    assert rel_err(k_out, cache_ref[0, slots // bs, slots % bs]) <= bound
    assert torch.equal(v_out, cache_ref[1, slots // bs, slots % bs]), "V is copied raw"
    # the separate Triton kernels of the old path
    Hq, Hkv, D = case["num_heads"], case["num_kv_heads"], case["head_dim"]
    qs, ks, _ = case["qkv"].split([Hq * D, Hkv * D, Hkv * D], dim=-1)
    qs, ks = qs.reshape(-1, Hq, D).contiguous(), ks.reshape(-1, Hkv, D).contiguous()
    if case["q_norm_weight"] is not None:
        qs = K.rmsnorm_triton(qs, case["q_norm_weight"], case["eps"])[0]
        ks = K.rmsnorm_triton(ks, case["k_norm_weight"], case["eps"])[0]
    qs, ks = K.rotary_triton(qs, ks, case["positions"], case["cos_sin_cache"])
    if CUDA:  # the fp32 sum of squares may be reduced in another order
        torch.testing.assert_close(q, qs, rtol=1e-2, atol=1e-2)
        torch.testing.assert_close(k_out, ks[stored], rtol=1e-2, atol=1e-2)
    else:
        assert torch.equal(q, qs) and torch.equal(k_out, ks[stored])


@pytest.mark.parametrize("impl", ["ref", pytest.param("triton", marks=needs_triton)])
def test_no_tokens_and_all_skipped(impl):
    fn = K.qkv_post_ref if impl == "ref" else K.qkv_post_triton
    case = make_case("qwen3", torch.float32)
    empty = dict(case, qkv=case["qkv"][:0], positions=case["positions"][:0], slot_mapping=case["slot_mapping"][:0])
    q, cache, _ = run(fn, empty)
    assert q.shape == (0, case["num_heads"], case["head_dim"])
    assert torch.equal(cache.nan_to_num(7.0), case["kv_cache"].nan_to_num(7.0))
    skipped = dict(case, slot_mapping=torch.full_like(case["slot_mapping"], -1))
    q, cache, _ = run(fn, skipped)
    assert not torch.isnan(q).any()
    assert torch.equal(cache.nan_to_num(7.0), case["kv_cache"].nan_to_num(7.0)), "slot -1 must store nothing"


@needs_triton
def test_strided_qkv_rows():
    """qkv rows may be strided (e.g. a slice of a wider buffer); only the last dim must be contiguous."""
    case = make_case("llama", torch.float32)
    wide = torch.randn(case["qkv"].shape[0], case["qkv"].shape[1] + 24, device=DEV)
    wide[:, : case["qkv"].shape[1]] = case["qkv"]
    strided = dict(case, qkv=wide[:, : case["qkv"].shape[1]])
    q_ref, cache_ref, _ = run(K.qkv_post_ref, case)
    q = K.qkv_post_triton(**dict(strided, kv_cache=case["kv_cache"].clone()))
    torch.testing.assert_close(q, q_ref, rtol=1e-5, atol=1e-5)


def test_dispatch_and_validation():
    case = make_case("qwen3", torch.float32)
    if not CUDA:
        q, _, _ = run(K.qkv_post, case)
        q_ref, _, _ = run(K.qkv_post_ref, case)
        assert torch.equal(q, q_ref)
    with pytest.raises(ValueError, match="together"):
        K.qkv_post_ref(**dict(case, k_norm_weight=None))
    with pytest.raises(ValueError, match="qkv must be"):
        K.qkv_post_ref(**dict(case, num_heads=case["num_heads"] + 1))
