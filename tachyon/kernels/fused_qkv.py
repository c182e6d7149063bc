"""Post-GEMM attention prologue in one pass: per-head q/k RMSNorm (optional), rotary, paged KV store.

Contract of `qkv_post(qkv, positions, cos_sin_cache, kv_cache, slot_mapping, q_norm_weight,
k_norm_weight, eps, num_heads, num_kv_heads, head_dim) -> q`:

- qkv [T, (Hq + 2 * Hkv) * D]: the fused q|k|v projection output, last dim contiguous (rows may be
  strided). It is read only, never modified.
- positions int64 [T]; cos_sin_cache [max_pos, rot_dim] (cos half then sin half, see `rotary.py`),
  rot_dim even and <= D; the first rot_dim features of every head are rotated (neox / rotate_half),
  the rest pass through.
- q_norm_weight / k_norm_weight [D] or None (both or neither): when given, q and k heads are first
  normalised as HF's Qwen3 RMSNorm does: `w * (x.float() * rsqrt(mean(x.float()**2) + eps)).to(dtype)`.
  The weights must have qkv's dtype (the model's), so the normalised heads keep that dtype.
- kv_cache [2, num_blocks, block_size, Hkv, D] (contiguous), slot_mapping int64 [T]: the rotated
  K and the raw V of token t go to slot `slot_mapping[t]` (cast to the cache dtype); slot -1 is
  skipped and nothing else in the cache is touched.
- Returns a new contiguous q [T, Hq, D] of qkv's dtype: normalised (if weights) and rotated.

The result equals, bit for bit on the reference path, the separate sequence split -> q_norm /
k_norm (`rmsnorm_ref`) -> `rotary_ref` -> `store_kv_ref`; the Triton kernel repeats its roundings
(each product rounded to the input dtype as HF's ops round it), so it differs only by the order of
the fp32 sum of squares.
"""

import torch

from tachyon.kernels._triton import next_pow2, pdl_args, pdl_trigger, pdl_wait, require_triton, tl, triton
from tachyon.kernels.quant_fp8 import cast_to_cache
from tachyon.kernels.rmsnorm import rmsnorm_ref
from tachyon.kernels.rotary import rotary_ref
from tachyon.kernels.store_kv import store_kv_ref


def _check_args(
    qkv: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    kv_cache: torch.Tensor,
    q_norm_weight: torch.Tensor | None,
    k_norm_weight: torch.Tensor | None,
    num_heads: int,
    num_kv_heads: int,
    head_dim: int,
) -> None:
    if qkv.dim() != 2 or qkv.shape[1] != (num_heads + 2 * num_kv_heads) * head_dim:
        raise ValueError(
            f"qkv must be [T, {(num_heads + 2 * num_kv_heads) * head_dim}], got {tuple(qkv.shape)}"
        )
    if (q_norm_weight is None) != (k_norm_weight is None):
        raise ValueError("q_norm_weight and k_norm_weight must be given together")
    rot = cos_sin_cache.shape[-1]
    if rot % 2 or rot > head_dim:
        raise ValueError(f"rotary dim {rot} must be even and <= head_dim {head_dim}")
    if tuple(kv_cache.shape[-2:]) != (num_kv_heads, head_dim):
        raise ValueError(f"kv_cache heads/dim {tuple(kv_cache.shape[-2:])} != ({num_kv_heads}, {head_dim})")


def qkv_post_ref(
    qkv: torch.Tensor,
    positions: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    kv_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    q_norm_weight: torch.Tensor | None,
    k_norm_weight: torch.Tensor | None,
    eps: float,
    num_heads: int,
    num_kv_heads: int,
    head_dim: int,
) -> torch.Tensor:
    """Plain torch: exactly the existing references in the model's order (HF parity on CPU)."""
    _check_args(qkv, cos_sin_cache, kv_cache, q_norm_weight, k_norm_weight, num_heads, num_kv_heads, head_dim)
    t = qkv.shape[0]
    q_size, kv_size = num_heads * head_dim, num_kv_heads * head_dim
    q, k, v = qkv.split([q_size, kv_size, kv_size], dim=-1)
    q = q.reshape(t, num_heads, head_dim)
    k = k.reshape(t, num_kv_heads, head_dim)
    v = v.reshape(t, num_kv_heads, head_dim)
    if q_norm_weight is not None:
        q = rmsnorm_ref(q, q_norm_weight, eps)[0]  # fresh tensors: qkv stays untouched
        k = rmsnorm_ref(k, k_norm_weight, eps)[0]
    else:
        # rotary works in place; copy so that qkv is not modified and q comes out contiguous
        q = q.clone(memory_format=torch.contiguous_format)
        k = k.clone(memory_format=torch.contiguous_format)
    q, k = rotary_ref(q, k, positions, cos_sin_cache)
    store_kv_ref(k, v, kv_cache, slot_mapping)
    return q.contiguous()


@triton.jit
def _load_heads(src_ptr, H, BLOCK_H: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr, HALF: tl.constexpr,
                ROT: tl.constexpr, CG: tl.constexpr = False):
    """[BLOCK_H, BLOCK_D] tile of H contiguous heads at src_ptr and the same tile of each feature's
    rotate_half partner p(d) (d + HALF below HALF, d - HALF below ROT, itself beyond; re-read rather than
    shuffled in registers). CG: through L2 (the heads were written by another program of the running launch).
    Returns (x, x_partner, h, d, mask)."""
    h = tl.arange(0, BLOCK_H)[:, None]
    d = tl.arange(0, BLOCK_D)[None, :]
    mask = (h < H) & (d < D)
    pd = tl.where(d < HALF, d + HALF, tl.where(d < ROT, d - HALF, d))
    if CG:
        x = tl.load(src_ptr + h * D + d, mask=mask, other=0.0, cache_modifier=".cg")
        xp = tl.load(src_ptr + h * D + pd, mask=mask, other=0.0, cache_modifier=".cg")
    else:
        x = tl.load(src_ptr + h * D + d, mask=mask, other=0.0)
        xp = tl.load(src_ptr + h * D + pd, mask=mask, other=0.0)
    return x, xp, h, d, mask


@triton.jit
def _norm_weights(w_ptr, d, D: tl.constexpr, HALF: tl.constexpr, ROT: tl.constexpr):
    """The per-head norm weight at features d and at their rotate_half partners (fp32): _norm_rope's w, wp.
    A parameter: a kernel may load it before pdl_wait."""
    pd = tl.where(d < HALF, d + HALF, tl.where(d < ROT, d - HALF, d))
    w = tl.load(w_ptr + d, mask=d < D, other=0.0).to(tl.float32)
    wp = tl.load(w_ptr + pd, mask=d < D, other=0.0).to(tl.float32)
    return w, wp


@triton.jit
def _norm_rope(x, xp, d, w, wp, c, s, sign, eps, D: tl.constexpr, HALF: tl.constexpr, ROT: tl.constexpr,
               HAS_NORM: tl.constexpr):
    """Optional RMSNorm (weights w, wp from _norm_weights; unused without HAS_NORM), then rotary, of a tile
    from _load_heads (x, its partners xp, feature index d)."""
    ty = x.dtype
    if HAS_NORM:
        xf = x.to(tl.float32)
        rstd = tl.rsqrt(tl.sum(xf * xf, 1) / D + eps)[:, None]
        # HF: normed = (x.float() * rstd).to(dtype); out = weight * normed (rounded to dtype)
        x = (w * (xf * rstd).to(ty).to(tl.float32)).to(ty)
        xp = (wp * (xp.to(tl.float32) * rstd).to(ty).to(tl.float32)).to(ty)
    # HF rotary: x * cos + rotate_half(x) * sin, each product rounded to the dtype, then the sum
    a = (x.to(tl.float32) * c).to(ty).to(tl.float32)
    b = (xp.to(tl.float32) * s).to(ty).to(tl.float32)
    return tl.where(d < ROT, (a + sign * b).to(ty), x)


@triton.jit
def _norm_rope_heads(
    src_ptr, w_ptr, c, s, sign, H, eps, PDL: tl.constexpr,
    BLOCK_H: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr, HALF: tl.constexpr,
    ROT: tl.constexpr, HAS_NORM: tl.constexpr,
):
    """[BLOCK_H, BLOCK_D] tile of H contiguous heads at src_ptr (written by the previous kernel: read after
    pdl_wait, which this waits on; the norm weights are read before it): optional RMSNorm, then rotary.
    Returns (out, h, d, mask)."""
    if HAS_NORM:
        w, wp = _norm_weights(w_ptr, tl.arange(0, BLOCK_D)[None, :], D, HALF, ROT)
    else:
        w, wp = c, s  # unused
    pdl_wait(PDL)
    x, xp, h, d, mask = _load_heads(src_ptr, H, BLOCK_H, D, BLOCK_D, HALF, ROT)
    return _norm_rope(x, xp, d, w, wp, c, s, sign, eps, D, HALF, ROT, HAS_NORM), h, d, mask


@triton.jit
def _qkv_post_kernel(
    qkv_ptr, pos_ptr, cs_ptr, kv_ptr, slot_ptr, q_out_ptr, qw_ptr, kw_ptr,
    stride_qkv, stride_cs, stride_kv, stride_tok, eps,
    Hq, Hkv,
    D: tl.constexpr, BLOCK_D: tl.constexpr, HALF: tl.constexpr, ROT: tl.constexpr,
    BLOCK_HQ: tl.constexpr, BLOCK_HKV: tl.constexpr, HAS_NORM: tl.constexpr, PDL: tl.constexpr,
):
    """Program (t, part): token t's q heads (part 0) or K / V (part 1, nothing for slot -1). Step inputs
    (positions, slot_mapping: copied from the host), the cos|sin rows and the norm weights are read before
    pdl_wait, only the qkv row after it."""
    pdl_trigger(PDL)
    t = tl.program_id(0).to(tl.int64)
    part = tl.program_id(1)  # 0: the q heads; 1: the k and v heads (skipped for slot -1)
    slot = tl.load(slot_ptr + t)
    if (part == 0) | (slot >= 0):
        row = qkv_ptr + t * stride_qkv
        pos = tl.load(pos_ptr + t)
        d = tl.arange(0, BLOCK_D)[None, :]
        in_rot = d < ROT
        j = tl.where(d < HALF, d, d - HALF)
        ty = qkv_ptr.dtype.element_ty
        # cos / sin rounded to the input dtype, as HF casts them
        c = tl.load(cs_ptr + pos * stride_cs + j, mask=in_rot, other=0.0).to(ty).to(tl.float32)
        s = tl.load(cs_ptr + pos * stride_cs + HALF + j, mask=in_rot, other=0.0).to(ty).to(tl.float32)
        sign = tl.where(d < HALF, -1.0, 1.0)
        # each branch keeps its own names: Triton needs values live across an `if` to agree in shape
        if part == 0:
            q_out, hq, dq, mq = _norm_rope_heads(
                row, qw_ptr, c, s, sign, Hq, eps, PDL, BLOCK_HQ, D, BLOCK_D, HALF, ROT, HAS_NORM
            )
            tl.store(q_out_ptr + t * Hq * D + hq * D + dq, q_out, mask=mq)
        else:
            k_out, hk, dk, mk = _norm_rope_heads(
                row + Hq * D, kw_ptr, c, s, sign, Hkv, eps, PDL, BLOCK_HKV, D, BLOCK_D, HALF, ROT, HAS_NORM
            )
            v = tl.load(row + (Hq + Hkv) * D + hk * D + dk, mask=mk)
            dst = kv_ptr + slot * stride_tok + hk * D + dk
            out_ty = kv_ptr.dtype.element_ty
            tl.store(dst, cast_to_cache(k_out, out_ty), mask=mk)
            tl.store(dst + stride_kv, cast_to_cache(v, out_ty), mask=mk)


def qkv_post_triton(
    qkv: torch.Tensor,
    positions: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    kv_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    q_norm_weight: torch.Tensor | None,
    k_norm_weight: torch.Tensor | None,
    eps: float,
    num_heads: int,
    num_kv_heads: int,
    head_dim: int,
) -> torch.Tensor:
    """Triton: one launch, grid (T, 2): program (t, 0) writes token t's q heads, (t, 1) its K/V."""
    require_triton()
    _check_args(qkv, cos_sin_cache, kv_cache, q_norm_weight, k_norm_weight, num_heads, num_kv_heads, head_dim)
    assert qkv.stride(-1) == 1 and cos_sin_cache.stride(-1) == 1 and kv_cache.is_contiguous()
    has_norm = q_norm_weight is not None
    if has_norm:
        assert q_norm_weight.dtype == qkv.dtype and k_norm_weight.dtype == qkv.dtype, "norm weights: qkv dtype"
        assert q_norm_weight.is_contiguous() and k_norm_weight.is_contiguous()
    T = qkv.shape[0]
    q = torch.empty(T, num_heads, head_dim, dtype=qkv.dtype, device=qkv.device)
    if T == 0:
        return q
    rot = cos_sin_cache.shape[-1]
    block_d = next_pow2(head_dim)
    block_hq = next_pow2(num_heads)
    warps = 4 if block_hq * block_d <= 2048 else 8
    qw = q_norm_weight if has_norm else q  # unused placeholders when there is no norm
    kw = k_norm_weight if has_norm else q
    # a contiguous cache: token slot s sits at s * stride(2) from the K (or V) base
    _qkv_post_kernel[(T, 2)](
        qkv, positions, cos_sin_cache, kv_cache, slot_mapping, q, qw, kw,
        qkv.stride(0), cos_sin_cache.stride(0), kv_cache.stride(0), kv_cache.stride(2), eps,
        num_heads, num_kv_heads,
        D=head_dim, BLOCK_D=block_d, HALF=rot // 2, ROT=rot,
        BLOCK_HQ=block_hq, BLOCK_HKV=next_pow2(num_kv_heads), HAS_NORM=has_norm, num_warps=warps,
        **pdl_args(qkv.device),
    )
    return q
