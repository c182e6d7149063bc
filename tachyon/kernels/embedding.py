"""Decode-step embedding: pick each row's input token, then gather its embedding row, in one kernel.

Contract: weight [V, H], input_ids [B], src [B] (integer), last_tokens [N] (integer) -> out [B, H] in
weight's dtype. Row r's token id is last_tokens[src[r]] when src[r] >= 0 (its input is still on the
device: the previous step's sampled token), else input_ids[r]; src[r] must be < N. out[r] = weight[id]
for an id in [0, V); an id outside it gives a zero row (the kernel reads nothing out of bounds). Inputs
are not modified. This replaces a clamp, an index, a compare, a where and an embedding lookup (five small
kernels per CUDA-graph decode step) by one launch.
"""

import torch

from tachyon.kernels._triton import next_pow2, pdl_args, pdl_trigger, pdl_wait, require_triton, tl, triton

BLOCK_MAX = 1024  # hidden elements per program


def embed_step_ref(
    weight: torch.Tensor, input_ids: torch.Tensor, src: torch.Tensor, last_tokens: torch.Tensor
) -> torch.Tensor:
    """Plain torch (no host sync, graph-capturable)."""
    ids = torch.where(src >= 0, last_tokens[src.clamp(min=0)], input_ids).to(torch.int64)
    valid = (ids >= 0) & (ids < weight.shape[0])
    return weight[torch.where(valid, ids, 0)].masked_fill_(~valid[:, None], 0)


@triton.jit
def _embed_step_kernel(w_ptr, ids_ptr, src_ptr, last_ptr, out_ptr, stride_w, V, H, BLOCK: tl.constexpr,
                       PDL: tl.constexpr):
    pdl_trigger(PDL)
    pdl_wait(PDL)
    row = tl.program_id(0).to(tl.int64)
    s = tl.load(src_ptr + row).to(tl.int64)
    # src >= 0: the input token is still on the device (the previous step's output); branch-free, as
    # triton 3.6 has mis-assigned scalars set inside branches (sampling_kernels.py)
    tok = tl.where(s >= 0, tl.load(last_ptr + tl.maximum(s, 0)).to(tl.int64), tl.load(ids_ptr + row).to(tl.int64))
    in_vocab = (tok >= 0) & (tok < V)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < H
    # an id outside [0, V) reads nothing: a zero row (a bound, not `mask & in_vocab`: Triton's interpreter
    # rejects a block mask combined with a scalar one)
    read = cols < tl.where(in_vocab, H, 0)
    x = tl.load(w_ptr + tok * stride_w + cols, mask=read, other=0.0)
    tl.store(out_ptr + row * H + cols, x, mask=mask)


def embed_step_triton(
    weight: torch.Tensor, input_ids: torch.Tensor, src: torch.Tensor, last_tokens: torch.Tensor
) -> torch.Tensor:
    """Triton: grid (B, cdiv(H, BLOCK)); each program picks its row's id and copies BLOCK elements."""
    require_triton()
    V, H = weight.shape
    B = input_ids.shape[0]
    out = torch.empty(B, H, dtype=weight.dtype, device=weight.device)
    if B == 0 or H == 0:
        return out
    if weight.stride(1) != 1:
        weight = weight.contiguous()
    # (no-ops for the runners' buffers)
    input_ids, src, last_tokens = input_ids.contiguous(), src.contiguous(), last_tokens.contiguous()
    BLOCK = min(BLOCK_MAX, next_pow2(H))
    _embed_step_kernel[(B, triton.cdiv(H, BLOCK))](
        weight, input_ids, src, last_tokens, out, weight.stride(0), V, H, BLOCK=BLOCK, num_warps=4,
        **pdl_args(weight.device),
    )
    return out
