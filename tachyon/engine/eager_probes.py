"""The eager step shapes that start-up compiles (runner_startup's second compile pass), so that no live eager step
compiles a Triton kernel late: every step without graphs (enforce_eager), and with graphs the steps no graph takes
(a prompt longer than the prefill graphs, a batch a graph cannot run).

An eager step launches its kernels at the batch's own sizes (batch, longest context, longest query), where the
graphs launch at their buckets and max_model_len; each Triton variant it can pick is set by a few launch classes
(split context or not, fused decode or not, PDL, the e4m3 widening, batch 1 / skinny / 16-multiple row counts, the
prefill query tile). These functions enumerate every batch size and both context classes through the same dispatch
helpers the kernels use and keep one shape per distinct class: a change of dispatch rule moves the classes with it.
Contract: pure host arithmetic on the model's head layout and the engine's limits, and the stand-in sequences the
runner feeds its own eager step functions; nothing runs here.
"""

from __future__ import annotations

import torch

from tachyon import kernels
from tachyon.engine.scheduler import SchedulerOutput
from tachyon.kernels._triton import next_pow2, sm_count
from tachyon.kernels.attention_config import (
    PREFILL_CONFIGS_BF16,
    PREFILL_WIDE_MIN_QUERY,
    attention_pdl,
    kv8_widen,
    prefill_config,
)
from tachyon.kernels.gemm_small import SMALL_M
from tachyon.kernels.split_kv import MIN_SPLIT_KEYS
from tachyon.models.llama import fused_decode_attention

SHORT_CONTEXT = 16  # keys of a probe that the decode launch never splits (<= 2 * MIN_SPLIT_KEYS)
KEPT_QUERY = 2  # new tokens per sequence of a kept-rows probe: a prefill step, not a decode one


def _contexts(max_model_len: int) -> list[int]:
    """One context per split class: short (never split) and max_model_len (split while the programs are few)."""
    short = min(SHORT_CONTEXT, max_model_len)
    return [short] if max_model_len <= 2 * MIN_SPLIT_KEYS else [short, max_model_len]


def _rows_class(rows: int) -> tuple[bool, bool, bool]:
    """Row-count classes that pick a GEMM variant or a Triton integer specialisation: one row (GEMV, batch-1
    layer), a skinny GEMM (2..SMALL_M rows), a multiple of 16."""
    return rows == 1, 1 < rows <= SMALL_M, rows % 16 == 0


def _attention_class(batch: int, context: int, num_kv_heads: int, device: torch.device,
                     cache_dtype: torch.dtype) -> tuple:
    """The dedicated decode kernel's launch class at `batch` sequences, the longest of `context` keys."""
    splits = kernels.decode_kv_splits(batch, num_kv_heads, context, device)
    programs = batch * num_kv_heads if splits == 1 else 0
    return (splits > 1, attention_pdl(programs or None, sm_count(device)),
            kv8_widen(cache_dtype, device, programs))


def decode_probe_shapes(max_num_seqs: int, max_model_len: int, num_kv_heads: int, device: torch.device,
                        cache_dtype: torch.dtype) -> list[tuple[int, int]]:
    """(batch, context) of one eager decode step per distinct class: rows, the attention's launch class and
    whether the fused qkv + attention kernel takes the step (models.llama.fused_decode_attention)."""
    seen: dict[tuple, tuple[int, int]] = {}
    for context in _contexts(max_model_len):
        for batch in range(1, max_num_seqs + 1):
            key = (_rows_class(batch), _attention_class(batch, context, num_kv_heads, device, cache_dtype),
                   fused_decode_attention(batch, num_kv_heads, context, device))
            seen.setdefault(key, (batch, context))
    return list(seen.values())


def kept_probe_shapes(max_num_seqs: int, max_model_len: int, max_tokens: int, num_kv_heads: int,
                      device: torch.device, cache_dtype: torch.dtype) -> list[tuple[int, int]]:
    """(sequences, context) of one eager prefill step per distinct class of its kept rows' attention (an eager
    prefill's last layer attends only the rows that sample, through the dedicated decode kernel at batch =
    the sampling sequences): each sequence brings KEPT_QUERY new tokens after a cached prefix, within the step's
    `max_tokens`."""
    most = min(max_num_seqs, max_tokens // KEPT_QUERY)
    seen: dict[tuple, tuple[int, int]] = {}
    for context in _contexts(max_model_len):
        context = max(context, KEPT_QUERY)
        for batch in range(1, most + 1):
            key = (_rows_class(batch), _attention_class(batch, context, num_kv_heads, device, cache_dtype))
            seen.setdefault(key, (batch, context))
    return list(seen.values())


def prefill_probe_lengths(max_tokens: int, num_heads: int, num_kv_heads: int, dtype: torch.dtype) -> list[int]:
    """One query length per distinct prefill-attention tile (attention_config.prefill_config) up to `max_tokens`:
    a prompt cut short by a cached prefix takes a smaller tile than the profile step's."""
    key = "fp32" if dtype == torch.float32 else "bf16"
    group = next_pow2(num_heads // num_kv_heads)
    # the tiles are intervals of query lengths: both sides of every breakpoint reach each of them
    edges = [limit for limit, _ in PREFILL_CONFIGS_BF16[:-1]] + [PREFILL_WIDE_MIN_QUERY - 1]
    candidates = sorted({min(q, max_tokens) for e in edges for q in (e, e + 1)})
    seen: dict[tuple, int] = {}
    for q in candidates:
        if q >= 2:  # one query token is a decode launch
            seen.setdefault(tuple(sorted(prefill_config(key, q, group).items())), q)
    return list(seen.values())


class ZeroTokens:
    """A stand-in sequence's token ids: `n` zeros, sliced without holding them."""

    def __init__(self, n: int):
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: slice) -> list[int]:
        return [0] * len(range(*index.indices(self.n)))


class ProbeSequence:
    """What batch.build_batch reads of a request, for the eager compile probes: `context` tokens of which the last
    `query` are new, every block the cache's block 0."""

    def __init__(self, context: int, query: int, block_size: int):
        self.token_ids = ZeroTokens(context)
        self.num_tokens = context
        self.num_computed_tokens = context - query
        self.block_ids = [0] * -(-context // block_size)

    def wants_prompt_logprobs(self) -> bool:
        return False


def probe_step(seqs: list[ProbeSequence]) -> SchedulerOutput:
    """One scheduled step of the stand-in sequences `seqs`, each computing its new tokens."""
    return SchedulerOutput(requests=seqs, num_new_tokens=[s.num_tokens - s.num_computed_tokens for s in seqs])
