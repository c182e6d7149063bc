"""Repetition, frequency and presence penalties from per-request token counts kept on the device.

Contract of apply_penalties(logits, rows, slots, counts, seen, params), in place on `logits` [B, V] (fp32, unit
stride along V): for each i, with x = logits[rows[i]], c = counts[slots[i]] (int32 [V], the request's output
tokens counted), s = seen[slots[i]] (bool [V], its prompt tokens) and (rp, f, p) = params[i] (fp32 [n, 3]):

  x = where(s | c > 0, where(x > 0, x / rp, x * rp), x)     repetition penalty (HF's, on prompt + output)
  x = x - f * c - p * (c > 0)                               frequency and presence (OpenAI's, on output only)

Neutral values (rp = 1, f = p = 0) leave a row unchanged bit for bit. `rows` and `slots` are int64 device
tensors with distinct `rows`; nothing is read from or written to the host (no sync).
"""

import torch

from tachyon.kernels._triton import require_triton, tl, triton

BLOCK = 2048


def apply_penalties_ref(logits: torch.Tensor, rows: torch.Tensor, slots: torch.Tensor, counts: torch.Tensor,
                        seen: torch.Tensor, params: torch.Tensor) -> None:
    """Plain torch: gather the rows, apply the two formulas, scatter them back."""
    x = logits.index_select(0, rows)
    c = counts.index_select(0, slots)
    hit = seen.index_select(0, slots) | (c > 0)
    rp, f, p = params[:, 0:1], params[:, 1:2], params[:, 2:3]
    x = torch.where(hit, torch.where(x > 0, x / rp, x * rp), x)
    x = x - f * c.to(x.dtype) - p * (c > 0).to(x.dtype)
    logits.index_copy_(0, rows, x)


@triton.jit
def _penalties_kernel(logits_ptr, stride_l, rows_ptr, slots_ptr, counts_ptr, seen_ptr, params_ptr, vocab,
                      BLOCK: tl.constexpr):
    """Grid (n, column blocks): one block of one row, read and written once."""
    i = tl.program_id(0)
    row = tl.load(rows_ptr + i)
    slot = tl.load(slots_ptr + i)
    rp = tl.load(params_ptr + i * 3)
    f = tl.load(params_ptr + i * 3 + 1)
    p = tl.load(params_ptr + i * 3 + 2)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < vocab
    ptrs = logits_ptr + row * stride_l + cols
    x = tl.load(ptrs, mask=mask, other=0.0)
    c = tl.load(counts_ptr + slot * vocab + cols, mask=mask, other=0)
    s = tl.load(seen_ptr + slot * vocab + cols, mask=mask, other=0)
    out_hit = c > 0
    rpv = tl.full([BLOCK], 1.0, tl.float32) * rp
    pen = tl.where(x > 0, tl.math.div_rn(x, rpv), x * rp)  # IEEE division, as torch's
    x = tl.where((s != 0) | out_hit, pen, x)
    x = x - f * c.to(tl.float32)
    x = x - tl.where(out_hit, p, 0.0)
    tl.store(ptrs, x, mask=mask)


def apply_penalties_triton(logits: torch.Tensor, rows: torch.Tensor, slots: torch.Tensor, counts: torch.Tensor,
                           seen: torch.Tensor, params: torch.Tensor) -> None:
    require_triton()
    n, vocab = rows.numel(), logits.shape[-1]
    if n == 0:
        return
    assert logits.dtype == torch.float32 and logits.stride(-1) == 1, "logits: fp32 with unit stride along vocab"
    assert counts.is_contiguous() and seen.is_contiguous() and counts.shape[-1] == seen.shape[-1] == vocab
    grid = (n, triton.cdiv(vocab, BLOCK))
    _penalties_kernel[grid](logits, logits.stride(0), rows, slots, counts, seen.view(torch.uint8),
                            params.contiguous(), vocab, BLOCK=BLOCK)
