"""L2 prefetch of a tensor's leading bytes: a performance hint that changes no memory.

Contract: `l2_prefetch(t, nbytes)` asks the GPU to bring the first `nbytes` (rounded down to 16) of
contiguous tensor `t` into L2 and returns at once; nothing is written, the caller may read or write `t`
at any time. Use it on a side stream while the main stream runs kernels that leave HBM idle (the
decode step's attention), for weights a later kernel of that stream streams. The reference is a no-op.

Triton (sm_90+): each lane issues one `cp.async.bulk.prefetch.L2.global` (the TMA engine's bulk
prefetch: no registers, no shared memory) of CHUNK bytes. On the CPU interpreter inline PTX cannot
run: the dispatcher sends only CUDA tensors here.
"""

import torch

from tachyon.kernels._triton import require_triton, tl, triton

CHUNK = 8192  # bytes per bulk prefetch instruction
LANES = 64  # instructions per program


def l2_prefetch_ref(t: torch.Tensor, nbytes: int) -> None:
    """Plain torch: nothing to do (a cache hint has no effect on results)."""
    return None


@triton.jit
def _l2_prefetch_kernel(ptr, nbytes, CHUNK: tl.constexpr, LANES: tl.constexpr):
    """Program p: bulk prefetches of bytes [(p * LANES + lane) * CHUNK, +CHUNK) clipped to nbytes (a
    multiple of 16); lanes past the end repeat the first chunk (harmless: a hint has no predicate here)."""
    lane = tl.program_id(0) * LANES + tl.arange(0, LANES)
    off = lane.to(tl.int64) * CHUNK
    size = tl.minimum(nbytes - off, CHUNK)
    live = size > 0
    addr = ptr + tl.where(live, off, 0)
    size = tl.where(live, size, 16).to(tl.int32)
    tl.inline_asm_elementwise("cp.async.bulk.prefetch.L2.global [$1], $2;\n\tmov.u32 $0, 0;", "=r,l,r",
                              [addr, size], dtype=tl.int32, is_pure=False, pack=1)


def l2_prefetch_triton(t: torch.Tensor, nbytes: int) -> None:
    require_triton()
    assert t.is_contiguous()
    n = min(int(nbytes), t.numel() * t.element_size()) // 16 * 16
    if n <= 0:
        return
    flat = t.view(-1).view(torch.uint8)
    _l2_prefetch_kernel[(triton.cdiv(n, CHUNK * LANES),)](flat, n, CHUNK=CHUNK, LANES=LANES, num_warps=2)
