"""Rotary embedding, neox / rotate_half style (HF Llama, Qwen2/3), applied to q and k in place.

Contract: q [T, Hq, D], k [T, Hkv, D] (last dim contiguous), positions int64 [T],
cos_sin_cache [max_pos, rot_dim] = cat(cos(p * inv_freq), sin(p * inv_freq)) per position p
(each half rot_dim // 2 wide; see `rope_cos_sin_cache`). The first rot_dim features of every head
are rotated (x * cos + rotate_half(x) * sin, with cos/sin cast to q's dtype as HF does); the rest
pass through. q and k are modified in place and returned.
"""

import torch

from tachyon.kernels._triton import next_pow2, pdl_args, pdl_trigger, pdl_wait, require_triton, tl, triton


def rope_cos_sin_cache(
    inv_freq: torch.Tensor, max_pos: int, attention_scaling: float = 1.0
) -> torch.Tensor:
    """fp32 [max_pos, 2 * len(inv_freq)] cache computed as HF's rotary embedding computes cos/sin."""
    freqs = torch.outer(torch.arange(max_pos, dtype=torch.float32), inv_freq.float().cpu())
    cache = torch.cat([freqs.cos() * attention_scaling, freqs.sin() * attention_scaling], dim=-1)
    return cache.to(inv_freq.device)


def _rotate_ref(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> None:
    rot = cos.shape[-1]
    xr = x[..., :rot]
    x1, x2 = xr[..., : rot // 2], xr[..., rot // 2 :]
    rotated = torch.cat([-x2, x1], dim=-1)
    xr.copy_(xr * cos + rotated * sin)


def rotary_ref(
    q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, cos_sin_cache: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Plain torch, HF's op order and roundings."""
    half = cos_sin_cache.shape[-1] // 2
    cs = cos_sin_cache[positions]
    cos = cs[:, :half].to(q.dtype)
    sin = cs[:, half:].to(q.dtype)
    cos = torch.cat([cos, cos], dim=-1).unsqueeze(1)  # [T, 1, rot]
    sin = torch.cat([sin, sin], dim=-1).unsqueeze(1)
    _rotate_ref(q, cos, sin)
    _rotate_ref(k, cos.to(k.dtype), sin.to(k.dtype))
    return q, k


@triton.jit
def _rotate_heads(x_ptr, stride_h, H, c, s, BLOCK_H: tl.constexpr, HALF: tl.constexpr,
                  BLOCK_HALF: tl.constexpr):
    h = tl.arange(0, BLOCK_H)[:, None]
    j = tl.arange(0, BLOCK_HALF)[None, :]
    mask = (h < H) & (j < HALF)
    p1 = x_ptr + h * stride_h + j
    x1 = tl.load(p1, mask=mask, other=0.0)
    x2 = tl.load(p1 + HALF, mask=mask, other=0.0)
    ty = x1.dtype
    cf = c.to(ty).to(tl.float32)
    sf = s.to(ty).to(tl.float32)
    a1 = (x1.to(tl.float32) * cf).to(ty).to(tl.float32)
    b1 = (x2.to(tl.float32) * sf).to(ty).to(tl.float32)
    a2 = (x2.to(tl.float32) * cf).to(ty).to(tl.float32)
    b2 = (x1.to(tl.float32) * sf).to(ty).to(tl.float32)
    tl.store(p1, (a1 - b1).to(ty), mask=mask)
    tl.store(p1 + HALF, (a2 + b2).to(ty), mask=mask)


@triton.jit
def _rotary_kernel(
    q_ptr, k_ptr, pos_ptr, cache_ptr, stride_qt, stride_qh, stride_kt, stride_kh, stride_cache,
    Hq, Hkv, BLOCK_HQ: tl.constexpr, BLOCK_HK: tl.constexpr, HALF: tl.constexpr, BLOCK_HALF: tl.constexpr,
    PDL: tl.constexpr,
):
    pdl_trigger(PDL)
    pdl_wait(PDL)
    t = tl.program_id(0).to(tl.int64)
    pos = tl.load(pos_ptr + t)
    j = tl.arange(0, BLOCK_HALF)[None, :]
    c = tl.load(cache_ptr + pos * stride_cache + j, mask=j < HALF, other=0.0)
    s = tl.load(cache_ptr + pos * stride_cache + HALF + j, mask=j < HALF, other=0.0)
    _rotate_heads(q_ptr + t * stride_qt, stride_qh, Hq, c, s, BLOCK_HQ, HALF, BLOCK_HALF)
    _rotate_heads(k_ptr + t * stride_kt, stride_kh, Hkv, c, s, BLOCK_HK, HALF, BLOCK_HALF)


def rotary_triton(
    q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, cos_sin_cache: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Triton: one program per token, all heads of q and k."""
    require_triton()
    T, Hq, _ = q.shape
    Hkv = k.shape[1]
    assert q.stride(-1) == 1 and k.stride(-1) == 1 and cos_sin_cache.stride(-1) == 1
    if T == 0:
        return q, k
    half = cos_sin_cache.shape[-1] // 2
    _rotary_kernel[(T,)](
        q, k, positions, cos_sin_cache, q.stride(0), q.stride(1), k.stride(0), k.stride(1),
        cos_sin_cache.stride(0), Hq, Hkv,
        BLOCK_HQ=next_pow2(Hq), BLOCK_HK=next_pow2(Hkv), HALF=half, BLOCK_HALF=next_pow2(half),
        **pdl_args(q.device),
    )
    return q, k
