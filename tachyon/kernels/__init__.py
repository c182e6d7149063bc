"""Compute layer: each op is a Triton kernel (`<op>_triton`) beside a plain-torch reference
(`<op>_ref`) of the same signature. The names exported here dispatch: Triton for CUDA tensors,
the reference otherwise, or always when the environment sets TACHYON_FORCE_REF=1 (read per call).
"""

import os

import torch

from tachyon.kernels._triton import HAS_TRITON, use_triton
from tachyon.kernels.activation import (
    silu_and_mul_quant_ref,
    silu_and_mul_quant_triton,
    silu_and_mul_ref,
    silu_and_mul_triton,
)
from tachyon.kernels.attention import attention_ref, attention_triton
from tachyon.kernels.attention_mixed import mixed_attention_ref, mixed_attention_triton
from tachyon.kernels.decode_fused import decode_qkv_attention_ref, decode_qkv_attention_triton
from tachyon.kernels.embedding import embed_step_ref, embed_step_triton
from tachyon.kernels.fused_qkv import qkv_post_ref, qkv_post_triton
from tachyon.kernels.gemm_small import gemm_small_triton
from tachyon.kernels.gemv import (
    gemv_ref,
    gemv_triton,
    rmsnorm_gemv_ref,
    rmsnorm_gemv_triton,
    silu_gemv_ref,
    silu_gemv_triton,
)
from tachyon.kernels.gemv_glu import gemv_glu_ref, gemv_glu_triton
from tachyon.kernels.gemv_select import (
    pick_fp8_gemv_config,
    pick_fp8_small_config,
    pick_fused_config,
    pick_gemv_config,
    pick_glu_config,
    pick_small_config,
)
from tachyon.kernels.layer_bs1 import (
    LayerBs1Weights,
    decoder_layer_bs1_ref,
    decoder_layer_bs1_triton,
    layer_bs1_fits,
)
from tachyon.kernels.layer_bs1_knobs import layer_bs1_mode
from tachyon.kernels.linear_dispatch import (
    fp8_gemm_small,
    fp8_gemv,
    fp8_linear,
    gemm_small,
    gemv,
    gemv_glu,
    quantize_rows,
    rmsnorm_gemv,
    rmsnorm_quant,
    silu_and_mul_quant,
    silu_gemv,
)
from tachyon.kernels.model_bs1 import decoder_model_bs1_ref, decoder_model_bs1_triton
from tachyon.kernels.penalties import apply_penalties_ref, apply_penalties_triton
from tachyon.kernels.prefetch import l2_prefetch_ref, l2_prefetch_triton
from tachyon.kernels.quant_fp8 import (
    QuantizedRows,
    fp8_gemm_small_triton,
    fp8_gemv_triton,
    fp8_linear_cuda,
    fp8_linear_ref,
    quantize_rows_ref,
    quantize_rows_triton,
    quantize_weight,
)
from tachyon.kernels.rmsnorm import rmsnorm_quant_ref, rmsnorm_quant_triton, rmsnorm_ref, rmsnorm_triton
from tachyon.kernels.rotary import rope_cos_sin_cache, rotary_ref, rotary_triton
from tachyon.kernels.sampling import sample_ref, sample_triton
from tachyon.kernels.split_kv import decode_kv_splits
from tachyon.kernels.store_kv import store_kv_ref, store_kv_triton


def store_kv(
    key: torch.Tensor, value: torch.Tensor, kv_cache: torch.Tensor, slot_mapping: torch.Tensor
) -> None:
    (store_kv_triton if use_triton(kv_cache) else store_kv_ref)(key, value, kv_cache, slot_mapping)


def attention(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    query_start_loc: torch.Tensor,
    seq_lens: torch.Tensor,
    block_tables: torch.Tensor,
    max_query_len: int,
    max_seq_len: int,
    scale: float,
    out: torch.Tensor | None = None,
    num_kv_splits: int = 0,
    decode_order: torch.Tensor | None = None,
) -> torch.Tensor:
    fn = attention_triton if use_triton(q) else attention_ref
    return fn(
        q, kv_cache, query_start_loc, seq_lens, block_tables, max_query_len, max_seq_len, scale,
        out, num_kv_splits, decode_order,
    )


def mixed_attention(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    decode_qsl: torch.Tensor,
    decode_seq_lens: torch.Tensor,
    decode_block_tables: torch.Tensor,
    chunk_qsl: torch.Tensor,
    chunk_seq_lens: torch.Tensor,
    chunk_block_tables: torch.Tensor,
    max_chunk_len: int,
    max_seq_len: int,
    scale: float,
    out: torch.Tensor | None = None,
    decode_order: torch.Tensor | None = None,
) -> torch.Tensor:
    """A mixed step's decode rows and prompt chunks in one launch (attention_mixed.py's contract)."""
    fn = mixed_attention_triton if use_triton(q) else mixed_attention_ref
    return fn(q, kv_cache, decode_qsl, decode_seq_lens, decode_block_tables, chunk_qsl, chunk_seq_lens,
              chunk_block_tables, max_chunk_len, max_seq_len, scale, out, decode_order)


def embed_step(
    weight: torch.Tensor, input_ids: torch.Tensor, src: torch.Tensor, last_tokens: torch.Tensor
) -> torch.Tensor:
    """Embeddings [B, H] of the step's input ids: last_tokens[src[r]] where src[r] >= 0, else input_ids[r];
    ids outside [0, V) give zero rows (embedding.py)."""
    return (embed_step_triton if use_triton(weight) else embed_step_ref)(weight, input_ids, src, last_tokens)


def rmsnorm(
    x: torch.Tensor, weight: torch.Tensor, eps: float, residual: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    return (rmsnorm_triton if use_triton(x) else rmsnorm_ref)(x, weight, eps, residual)


def rotary(
    q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, cos_sin_cache: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    return (rotary_triton if use_triton(q) else rotary_ref)(q, k, positions, cos_sin_cache)


def qkv_post(
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
    """Optional q/k RMSNorm + rotary + KV store of the fused qkv output; returns q [T, Hq, D].
    TACHYON_FUSED_QKV=0 runs the separate Triton kernels instead (A/B switch for the fused kernel)."""
    if use_triton(qkv):
        fn = qkv_post_triton if os.environ.get("TACHYON_FUSED_QKV", "1") != "0" else _qkv_post_separate
    else:
        fn = qkv_post_ref
    return fn(
        qkv, positions, cos_sin_cache, kv_cache, slot_mapping, q_norm_weight, k_norm_weight, eps,
        num_heads, num_kv_heads, head_dim,
    )


def decode_qkv_attention(
    qkv: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    kv_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    q_norm_weight: torch.Tensor | None,
    k_norm_weight: torch.Tensor | None,
    eps: float,
    num_heads: int,
    num_kv_heads: int,
    head_dim: int,
    query_start_loc: torch.Tensor,
    seq_lens: torch.Tensor,
    block_tables: torch.Tensor,
    max_seq_len: int,
    scale: float,
    decode_order: torch.Tensor | None = None,
) -> torch.Tensor:
    """Decode batch (one token per sequence at position seq_lens - 1): qkv_post + attention in one Triton
    kernel (+ the split merge) on CUDA -> out [B, Hq, D] (decode_fused.py)."""
    fn = decode_qkv_attention_triton if use_triton(qkv) else decode_qkv_attention_ref
    return fn(qkv, cos_sin_cache, kv_cache, slot_mapping, q_norm_weight, k_norm_weight, eps, num_heads, num_kv_heads,
              head_dim, query_start_loc, seq_lens, block_tables, max_seq_len, scale, decode_order=decode_order)


def decoder_layer_bs1(
    x: torch.Tensor,
    residual: torch.Tensor | None,
    lw: LayerBs1Weights,
    kv_cache: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    seq_lens: torch.Tensor,
    block_tables: torch.Tensor,
    max_seq_len: int,
    phases: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A whole decoder layer for one decode token -> (MLP output, residual stream after attention): one Triton
    launch on CUDA (`phases`: five), the unfused references otherwise (layer_bs1.py)."""
    fn = decoder_layer_bs1_triton if use_triton(x) else decoder_layer_bs1_ref
    return fn(x, residual, lw, kv_cache, cos_sin_cache, slot_mapping, seq_lens, block_tables, max_seq_len,
              phases=phases)


def decoder_model_bs1(
    x: torch.Tensor,
    layers: list[LayerBs1Weights],
    kv_caches: list[torch.Tensor],
    cos_sin_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    seq_lens: torch.Tensor,
    block_tables: torch.Tensor,
    max_seq_len: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Every decoder layer for one decode token -> (last MLP output, residual stream after its attention): one
    Triton launch on CUDA, the layer references in turn otherwise (model_bs1.py)."""
    fn = decoder_model_bs1_triton if use_triton(x) else decoder_model_bs1_ref
    return fn(x, layers, kv_caches, cos_sin_cache, slot_mapping, seq_lens, block_tables, max_seq_len)


def _qkv_post_separate(qkv, positions, cos_sin_cache, kv_cache, slot_mapping, q_norm_weight, k_norm_weight, eps,
                       num_heads, num_kv_heads, head_dim):
    """The unfused sequence (rmsnorm, rotary, store_kv kernels one after another); graph-capturable."""
    t = qkv.shape[0]
    q, k, v = qkv.split([num_heads * head_dim, num_kv_heads * head_dim, num_kv_heads * head_dim], dim=-1)
    q, k = q.reshape(t, num_heads, head_dim), k.reshape(t, num_kv_heads, head_dim)
    if q_norm_weight is not None:
        q, k = rmsnorm(q, q_norm_weight, eps)[0], rmsnorm(k, k_norm_weight, eps)[0]
    else:
        q, k = q.contiguous(), k.contiguous()
    q, k = rotary(q, k, positions, cos_sin_cache)
    store_kv(k, v.reshape(t, num_kv_heads, head_dim), kv_cache, slot_mapping)
    return q


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    return (silu_and_mul_triton if use_triton(x) else silu_and_mul_ref)(x)


def l2_prefetch(t: torch.Tensor, nbytes: int) -> None:
    """Hint: bring t's first nbytes into L2 (CUDA, sm_90+); a no-op elsewhere. Changes no memory."""
    if use_triton(t) and torch.cuda.get_device_capability(t.device)[0] >= 9:
        l2_prefetch_triton(t, nbytes)
    else:
        l2_prefetch_ref(t, nbytes)


def sample(
    logits: torch.Tensor,
    temperature: torch.Tensor,
    top_k: torch.Tensor,
    top_p: torch.Tensor,
    min_p: torch.Tensor,
    seeds: torch.Tensor,
    steps: torch.Tensor,
    out: torch.Tensor | None = None,
    unfiltered: bool = False,
) -> torch.Tensor:
    """Token ids int64 [B] (sampling.py); written into `out` (int64 [B], contiguous) and returned when given.
    `unfiltered`: every row is greedy or has no top-k / top-p / min-p filter (sampling.row_is_unfiltered), so
    the Triton path launches fewer kernels; the tokens are the same."""
    fn = sample_triton if use_triton(logits) else sample_ref
    return fn(logits, temperature, top_k, top_p, min_p, seeds, steps, out=out, unfiltered=unfiltered)


def apply_penalties(logits: torch.Tensor, rows: torch.Tensor, slots: torch.Tensor, counts: torch.Tensor,
                    seen: torch.Tensor, params: torch.Tensor) -> None:
    """In place on logits[rows[i]]: repetition, frequency and presence penalties from the token counts of
    counts[slots[i]] / seen[slots[i]] and params[i] = (repetition, frequency, presence) (penalties.py)."""
    fn = apply_penalties_triton if use_triton(logits) else apply_penalties_ref
    fn(logits, rows, slots, counts, seen, params)


__all__ = [
    "apply_penalties",
    "apply_penalties_ref",
    "apply_penalties_triton",
    "fp8_gemm_small",
    "fp8_gemm_small_triton",
    "pick_fp8_small_config",
    "fp8_gemv",
    "fp8_gemv_triton",
    "pick_fp8_gemv_config",
    "fp8_linear",
    "fp8_linear_cuda",
    "fp8_linear_ref",
    "quantize_rows",
    "QuantizedRows",
    "rmsnorm_quant",
    "rmsnorm_quant_ref",
    "rmsnorm_quant_triton",
    "silu_and_mul_quant",
    "silu_and_mul_quant_ref",
    "silu_and_mul_quant_triton",
    "quantize_rows_ref",
    "quantize_rows_triton",
    "quantize_weight",
    "HAS_TRITON",
    "use_triton",
    "store_kv",
    "attention",
    "mixed_attention",
    "mixed_attention_ref",
    "mixed_attention_triton",
    "embed_step",
    "embed_step_ref",
    "embed_step_triton",
    "rmsnorm",
    "rotary",
    "rope_cos_sin_cache",
    "qkv_post",
    "decode_qkv_attention",
    "decode_kv_splits",
    "decode_qkv_attention_ref",
    "decode_qkv_attention_triton",
    "decoder_layer_bs1",
    "decoder_layer_bs1_ref",
    "decoder_layer_bs1_triton",
    "decoder_model_bs1",
    "decoder_model_bs1_ref",
    "decoder_model_bs1_triton",
    "LayerBs1Weights",
    "layer_bs1_fits",
    "layer_bs1_mode",
    "silu_and_mul",
    "gemv",
    "gemv_ref",
    "gemv_triton",
    "pick_gemv_config",
    "pick_fused_config",
    "pick_small_config",
    "gemm_small",
    "gemm_small_triton",
    "rmsnorm_gemv",
    "rmsnorm_gemv_ref",
    "rmsnorm_gemv_triton",
    "silu_gemv",
    "silu_gemv_ref",
    "silu_gemv_triton",
    "gemv_glu",
    "gemv_glu_ref",
    "gemv_glu_triton",
    "pick_glu_config",
    "sample",
    "l2_prefetch",
    "l2_prefetch_ref",
    "l2_prefetch_triton",
    "store_kv_ref",
    "store_kv_triton",
    "attention_ref",
    "attention_triton",
    "rmsnorm_ref",
    "rmsnorm_triton",
    "rotary_ref",
    "rotary_triton",
    "qkv_post_ref",
    "qkv_post_triton",
    "silu_and_mul_ref",
    "silu_and_mul_triton",
    "sample_ref",
    "sample_triton",
]
