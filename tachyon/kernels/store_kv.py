"""Write new tokens' K/V into the paged cache.

Contract: key, value [T, Hkv, D] (last two dims contiguous), kv_cache [2, num_blocks, block_size,
Hkv, D] (contiguous), slot_mapping int64 [T] with slot = block * block_size + offset, -1 = skip.
The cache is written in place (values cast to its dtype: quant_fp8.cast_to_cache, saturating for an e4m3
cache); nothing else is touched.
"""

import torch

from tachyon.kernels._triton import next_pow2, pdl_args, pdl_trigger, pdl_wait, require_triton, tl, triton
from tachyon.kernels.quant_fp8 import cast_to_cache, cast_to_cache_ref


def store_kv_ref(
    key: torch.Tensor, value: torch.Tensor, kv_cache: torch.Tensor, slot_mapping: torch.Tensor
) -> None:
    """Plain-torch store_kv: index_copy_ into the cache's slot rows when the cache is contiguous, else index_put
    (any strides)."""
    block_size = kv_cache.shape[2]
    keep = slot_mapping >= 0
    if bool(keep.all()):
        slots, key, value = slot_mapping, key, value
    else:
        slots, key, value = slot_mapping[keep], key[keep], value[keep]
    key, value = cast_to_cache_ref(key, kv_cache.dtype), cast_to_cache_ref(value, kv_cache.dtype)
    if kv_cache.is_contiguous():
        rows = kv_cache.view(2, -1, *kv_cache.shape[3:])  # [2, slots, Hkv, D]
        if kv_cache.element_size() == 1:  # index_copy_ has no float8 CPU kernel: copy the bytes
            rows, key, value = rows.view(torch.uint8), key.view(torch.uint8), value.view(torch.uint8)
        rows[0].index_copy_(0, slots.long(), key)
        rows[1].index_copy_(0, slots.long(), value)
        return
    blk, off = slots // block_size, slots % block_size
    kv_cache[0, blk, off] = key
    kv_cache[1, blk, off] = value


@triton.jit
def _store_kv_kernel(
    k_ptr, v_ptr, cache_ptr, slot_ptr,
    stride_kt, stride_kh, stride_vt, stride_vh,
    stride_c_kv, stride_c_tok, stride_c_h,
    H: tl.constexpr, D: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr, PDL: tl.constexpr,
):
    pdl_trigger(PDL)
    pdl_wait(PDL)
    t = tl.program_id(0)
    slot = tl.load(slot_ptr + t)
    if slot >= 0:
        h = tl.arange(0, BLOCK_H)[:, None]
        d = tl.arange(0, BLOCK_D)[None, :]
        mask = (h < H) & (d < D)
        k = tl.load(k_ptr + t * stride_kt + h * stride_kh + d, mask=mask)
        v = tl.load(v_ptr + t * stride_vt + h * stride_vh + d, mask=mask)
        dst = cache_ptr + slot * stride_c_tok + h * stride_c_h + d
        ty = cache_ptr.dtype.element_ty
        tl.store(dst, cast_to_cache(k, ty), mask=mask)
        tl.store(dst + stride_c_kv, cast_to_cache(v, ty), mask=mask)


def store_kv_triton(
    key: torch.Tensor, value: torch.Tensor, kv_cache: torch.Tensor, slot_mapping: torch.Tensor
) -> None:
    """Triton store_kv: one program per token."""
    require_triton()
    T, H, D = key.shape
    if T == 0:
        return
    assert key.stride(-1) == 1 and value.stride(-1) == 1 and kv_cache.is_contiguous()
    # a contiguous cache: token slot s sits at s * stride(2) from the K (or V) base
    _store_kv_kernel[(T,)](
        key, value, kv_cache, slot_mapping,
        key.stride(0), key.stride(1), value.stride(0), value.stride(1),
        kv_cache.stride(0), kv_cache.stride(2), kv_cache.stride(3),
        H=H, D=D, BLOCK_H=next_pow2(H), BLOCK_D=next_pow2(D), **pdl_args(key.device),
    )
