"""Split-KV decode: how a decode launch cuts each sequence's context into splits, and how the splits'
partial softmaxes (output, log-sum-exp) are merged. Shared by the dedicated decode kernel (attention.py)
and the fused one (decode_fused.py).

Contract: `plan_splits(...)` picks the split count (`choose_kv_splits`, or the caller's), allocates the
partial buffers and takes the policy switches (early exit of empty splits, inline merge); the decode
kernel gets `plan.kernel_args()` and the buffers, calls `_split_output` with each split's result, and the
caller then runs `plan.merge(...)`, which launches `_split_reduce_kernel` unless the kernel merged inline.
A sequence of S keys cut into at most num_splits splits uses splits of `_split_len` keys (a multiple of
BLOCK_N), so a short context in a graph captured at max_seq_len = max_model_len uses only its first few.
Merges run in split order (deterministic). The inline merge's counters (`_triton.sync_counters`) are
zero before and after every launch.
"""

import math
import os
from dataclasses import dataclass

import torch

from tachyon.kernels._triton import next_pow2, pdl_trigger, pdl_wait, sm_count, sync_counters, tl, triton

# Keys per decode split at least (one bf16 BLOCK_N tile): a shorter split would not shorten the
# critical path (a program's latency is that of its first tile) but would add partials to merge.
MIN_SPLIT_KEYS = 128
# decode launches of fewer (sequence, KV head) programs than this many times the SM count split the context
DECODE_SPLIT_WAVES = 1.0
# most splits per sequence: the merge kernel's tile (one compile for every split count)
MAX_KV_SPLITS = 64
# splits whose partials the inline merge loads per step ([BLOCK_G, this, BLOCK_D] fp32 tiles)
INLINE_MERGE_SPLITS = 4


def decode_split_waves() -> float:
    """Program waves (multiples of the SM count) below which a decode launch splits the context:
    DECODE_SPLIT_WAVES, or TACHYON_DECODE_SPLIT_WAVES (an A/B knob, read per launch: a CUDA graph keeps what was
    in force at capture)."""
    env = os.environ.get("TACHYON_DECODE_SPLIT_WAVES", "")
    try:
        waves = float(env) if env else DECODE_SPLIT_WAVES
    except ValueError:
        waves = -1.0
    if not waves > 0:
        raise ValueError(f"TACHYON_DECODE_SPLIT_WAVES must be a positive number of waves, got {env!r}")
    return waves


def choose_kv_splits(num_seqs: int, num_kv_heads: int, max_seq_len: int, num_sms: int,
                     waves: float | None = None) -> int:
    """Split the context only when the (sequence, KV head) programs are fewer than `waves` (default
    decode_split_waves()) times the SM count and max_seq_len holds more than two splits; the programs then
    reach max(2, waves) times the SM count, each sequence dividing its own context into at most that many
    splits of >= MIN_SPLIT_KEYS keys (rounded to BLOCK_N), so a short context uses only its first few
    splits (the others exit at once) and a CUDA graph captured at max_seq_len = max_model_len still
    spreads it. (Fewer, longer splits measured slower on the H200: attn_split_ab_h200.json.)"""
    waves = decode_split_waves() if waves is None else waves
    programs = num_seqs * num_kv_heads
    if programs >= waves * num_sms or max_seq_len <= 2 * MIN_SPLIT_KEYS:
        return 1
    by_len = -(-max_seq_len // MIN_SPLIT_KEYS)
    return max(1, min(by_len, math.ceil(max(2.0, waves) * num_sms / programs), MAX_KV_SPLITS))


def decode_early_exit(fused: bool) -> bool:
    """Whether split-KV decode programs with no keys return before their PDL wait instead of writing an
    empty partial (the merge then reads only the splits that hold keys). It frees the SM slots that a
    graph's max_model_len-sized grid fills with waiting empty programs at small batch. Default: on for
    the dedicated decode kernel (H200, 7B bs1 step at a 512-token context 3.860 -> 3.823 ms, even at
    4,096 and on 0.6B), off for the fused one (B=8 steps 0.01-0.06 ms slower with it:
    `early_exit_7903662/`). TACHYON_DECODE_EARLY_EXIT=1 / 0 forces it on / off for both (read per
    launch, so a CUDA graph keeps what was in force at capture)."""
    env = os.environ.get("TACHYON_DECODE_EARLY_EXIT", "")
    if env in ("0", "1"):
        return env == "1"
    return not fused


def decode_inline_merge(fused: bool) -> bool:
    """Whether split-KV decode kernels merge the partials themselves (the last split program of each
    (sequence, KV head) to finish; no merge kernel) instead of launching _split_reduce_kernel. Default: on
    for the fused decode kernel (H200 step replays: 7B B=8 4.148 -> 4.115 ms at a 512-token context,
    0.6B B=8 2.034 -> 1.70 ms at 4,096), off for the dedicated one (7B bs1 3.778 -> 3.792 at 512,
    3.902 -> 3.971 at 4,096: `inline_merge_*/`). TACHYON_DECODE_MERGE=inline / kernel forces it for both
    (read per launch: a CUDA graph keeps what was in force at capture)."""
    env = os.environ.get("TACHYON_DECODE_MERGE", "")
    if env in ("inline", "kernel"):
        return env == "inline"
    return fused


def decode_kv_splits(num_seqs: int, num_kv_heads: int, max_seq_len: int, device: torch.device) -> int:
    """The split count a decode launch picks automatically on `device` (1: the context is not split)."""
    return choose_kv_splits(num_seqs, num_kv_heads, max_seq_len, sm_count(device))


@dataclass
class SplitPlan:
    """One decode launch's split-KV set-up. Owns the partial buffers (mid_o [B, Hq, splits, D], mid_lse
    [B, Hq, splits], fp32; `out` stands in for them, and for the counters, where they are unused)."""
    splits: int
    mid_o: torch.Tensor
    mid_lse: torch.Tensor
    counters: torch.Tensor
    early: bool
    inline: bool

    def kernel_args(self) -> dict:
        """The decode kernels' split keyword arguments."""
        return dict(num_splits=self.splits, SPLIT=self.splits > 1, EARLY_EXIT=self.early, INLINE=self.inline,
                    LSE_S=MAX_KV_SPLITS, MERGE_S=INLINE_MERGE_SPLITS)

    def merge(self, out: torch.Tensor, query_start_loc: torch.Tensor, seq_lens: torch.Tensor, block_n: int,
              pdl: dict) -> None:
        """After the decode kernel: out[token of b, h] = the softmax-weighted sum of mid_o[b, h, :splits], by
        _split_reduce_kernel (only the splits that hold keys when empty ones exited early); nothing when
        the context is not split or the kernel merged inline."""
        if self.splits == 1 or self.inline:
            return
        B, Hq, _, D = self.mid_o.shape
        _split_reduce_kernel[(B, Hq)](
            self.mid_o, self.mid_lse, out, query_start_loc, out.stride(0), out.stride(1),
            num_splits=self.splits, Hq=Hq, D=D, BLOCK_S=MAX_KV_SPLITS, BLOCK_D=next_pow2(D), **pdl,
            seq_lens_ptr=seq_lens, BLOCK_N=block_n, ACTIVE_ONLY=self.early,
        )


def plan_splits(B: int, Hq: int, Hkv: int, D: int, max_seq_len: int, num_kv_splits: int, out: torch.Tensor,
                fused: bool) -> SplitPlan:
    """The split plan of a decode launch of B sequences on out's device: num_kv_splits (0: choose_kv_splits),
    at most MAX_KV_SPLITS; the policies of the dedicated (fused False) or fused decode kernel."""
    dev = out.device
    splits = min(num_kv_splits or choose_kv_splits(B, Hkv, max_seq_len, sm_count(dev)), MAX_KV_SPLITS)
    if splits == 1:
        return SplitPlan(1, out, out, out, False, False)
    mid_o = torch.empty(B, Hq, splits, D, device=dev, dtype=torch.float32)
    mid_lse = torch.empty(B, Hq, splits, device=dev, dtype=torch.float32)
    inline = decode_inline_merge(fused)
    counters = sync_counters(dev, B * Hkv) if inline else mid_lse
    return SplitPlan(splits, mid_o, mid_lse, counters, decode_early_exit(fused), inline)


# ----------------------------------------------------------------------------------------------
# Triton


@triton.jit
def _split_len(S, num_splits, BLOCK_N: tl.constexpr):
    """Keys per split of a sequence of S keys cut into at most num_splits splits (a multiple of BLOCK_N)."""
    return tl.maximum(tl.cdiv(tl.cdiv(S, num_splits), BLOCK_N), 1) * BLOCK_N


@triton.jit
def _merge_heads(mid_o_ptr, mid_lse_ptr, dst, b, heads, gmask, d, dmask, n_act, num_splits,
                 Hq: tl.constexpr, D: tl.constexpr, BLOCK_G: tl.constexpr, BLOCK_D: tl.constexpr,
                 LSE_S: tl.constexpr, MERGE_S: tl.constexpr):
    """Store to dst [BLOCK_G, BLOCK_D] pointers the softmax-weighted sum of the partials (mid_o, mid_lse) of
    splits 0 .. n_act - 1 (n_act <= LSE_S) of query heads `heads` of sequence b. Loads bypass L1 (.cg):
    the partials were written by other programs of the running kernel."""
    base = (b * Hq + heads) * num_splits
    s_all = tl.arange(0, LSE_S)
    lse = tl.load(mid_lse_ptr + base[:, None] + s_all[None, :], mask=gmask[:, None] & (s_all < n_act)[None, :],
                  other=float("-inf"), cache_modifier=".cg")
    mx = tl.where(gmask, tl.max(lse, 1), 0.0)
    tot = tl.sum(tl.exp(lse - mx[:, None]), 1)
    acc = tl.zeros([BLOCK_G, BLOCK_D], tl.float32)
    s0 = tl.arange(0, MERGE_S)
    for c in range(0, n_act, MERGE_S):
        s = c + s0
        gs = gmask[:, None] & (s < n_act)[None, :]
        rows = base[:, None] + s[None, :]
        w = tl.exp(tl.load(mid_lse_ptr + rows, mask=gs, other=float("-inf"), cache_modifier=".cg") - mx[:, None])
        o = tl.load(mid_o_ptr + (rows * D)[:, :, None] + d[None, None, :], mask=gs[:, :, None] & dmask[None, None, :],
                    other=0.0, cache_modifier=".cg")
        acc += tl.sum(w[:, :, None] * o, 1)
    res = acc / tl.where(gmask, tot, 1.0)[:, None]
    tl.store(dst, res.to(dst.dtype.element_ty), mask=gmask[:, None] & dmask[None, :])


@triton.jit
def _split_output(o, m_i, l_i, dst, mid_o_ptr, mid_lse_ptr, cnt_ptr, b, hk, sp, S, split_len, num_splits,
                  heads, gmask, d, dmask, Hq: tl.constexpr, Hkv: tl.constexpr, D: tl.constexpr,
                  BLOCK_G: tl.constexpr, BLOCK_D: tl.constexpr, INLINE: tl.constexpr, EARLY_EXIT: tl.constexpr,
                  LSE_S: tl.constexpr, MERGE_S: tl.constexpr):
    """What split program sp does with its normalised output o and softmax stats (m_i, l_i); a split past
    the sequence's keys (sp >= n_act = cdiv(S, split_len)) has none (o = 0, l_i = 0).
    Not INLINE: store the partial (lse -inf for an empty split) for _split_reduce_kernel.
    INLINE: n_act == 1: split 0 stores o to dst (the output rows), the others nothing. Otherwise the active
    splits store their partials, then each program counts itself in at cnt[b, hk] (a CTA barrier, then one
    acq_rel atomic at GPU scope): the n_act active ones, or with EARLY_EXIT off all num_splits (empty splits
    did not return early); the last to arrive resets the counter to 0 (the next launch finds it zeroed)
    and merges the n_act partials into dst."""
    row = (b * Hq + heads) * num_splits + sp  # mid_o [B, Hq, num_splits, D], mid_lse [B, Hq, num_splits]
    omask = gmask[:, None] & dmask[None, :]
    if INLINE:
        n_act = tl.cdiv(S, split_len)
        if n_act == 1:
            if sp == 0:
                tl.store(dst, o.to(dst.dtype.element_ty), mask=omask)
        else:
            if sp < n_act:
                tl.store(mid_o_ptr + row[:, None] * D + d[None, :], o, mask=omask)
                tl.store(mid_lse_ptr + row, m_i + tl.log(l_i), mask=gmask)
            tl.debug_barrier()  # every thread's partial is written before the count
            if EARLY_EXIT:
                n_cnt = n_act
            else:
                n_cnt = num_splits
            cnt = cnt_ptr + b * Hkv + hk
            if tl.atomic_add(cnt, 1, sem="acq_rel", scope="gpu") == n_cnt - 1:
                tl.atomic_xchg(cnt, 0, sem="relaxed", scope="gpu")
                _merge_heads(mid_o_ptr, mid_lse_ptr, dst, b, heads, gmask, d, dmask, n_act, num_splits,
                             Hq, D, BLOCK_G, BLOCK_D, LSE_S, MERGE_S)
    else:
        tl.store(mid_o_ptr + row[:, None] * D + d[None, :], o, mask=omask)
        tl.store(mid_lse_ptr + row, m_i + tl.log(l_i), mask=gmask)


@triton.jit(do_not_specialize=["num_splits"])
def _split_reduce_kernel(
    mid_o_ptr, mid_lse_ptr, out_ptr, qsl_ptr, stride_ot, stride_oh,
    num_splits, Hq: tl.constexpr, D: tl.constexpr,
    BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr, PDL: tl.constexpr,
    seq_lens_ptr=None, BLOCK_N: tl.constexpr = 0, ACTIVE_ONLY: tl.constexpr = False,
):
    """Merge the partial softmaxes of one (sequence, query head). ACTIVE_ONLY: only the splits that hold
    keys (the decode kernel's EARLY_EXIT leaves the others unwritten). The step inputs (seq_lens,
    query_start_loc) are read before pdl_wait; after it the partials' outputs and log-sum-exps are loaded
    together, before the weights' reductions."""
    pdl_trigger(PDL)
    b = tl.program_id(0)
    h = tl.program_id(1)
    sidx = tl.arange(0, BLOCK_S)
    d = tl.arange(0, BLOCK_D)
    if ACTIVE_ONLY:
        S = tl.load(seq_lens_ptr + b)
        smask = sidx < tl.minimum(tl.cdiv(S, _split_len(S, num_splits, BLOCK_N)), num_splits)
    else:
        smask = sidx < num_splits
    tok = tl.load(qsl_ptr + b).to(tl.int64)
    pdl_wait(PDL)
    row = (b * Hq + h) * num_splits + sidx
    o = tl.load(mid_o_ptr + row[:, None] * D + d[None, :], mask=smask[:, None] & (d < D)[None, :], other=0.0)
    lse = tl.load(mid_lse_ptr + row, mask=smask, other=float("-inf"))
    w = tl.exp(lse - tl.max(lse, 0))
    w = w / tl.sum(w, 0)
    res = tl.sum(o * w[:, None], 0)
    tl.store(out_ptr + tok * stride_ot + h * stride_oh + d, res.to(out_ptr.dtype.element_ty), mask=d < D)
