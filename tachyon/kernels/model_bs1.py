"""Every decoder layer for one decode token in one launch (TACHYON_LAYER_BS1=model, an A/B knob: it ran 20-33%
slower than the ten-kernel layer on Qwen3-0.6B bs1, H100, stop 56). The layer kernel's phases (layer_bs1.py's
`_layer_phases`) loop over the layers, reading each layer's tensors from a pointer table, with a grid barrier
between layers too.

Contract of `decoder_model_bs1(x, layers, kv_caches, cos_sin_cache, slot_mapping, seq_lens, block_tables,
max_seq_len) -> (y, h2)`: x [1, H] is the embedding (the first layer's stream); layers / kv_caches pair up, share
one shape, dtype and options; returns the last layer's MLP output and residual stream, what the model's layer loop
hands to the final norm. The reference runs decoder_layer_bs1_ref layer by layer."""

from __future__ import annotations

import torch

from tachyon.kernels._triton import NeedsEagerRun, pdl_trigger, tl, triton
from tachyon.kernels.layer_bs1 import LayerBs1Weights, _check, _layer_phases, _prepare, decoder_layer_bs1_ref

# rows of the model kernel's pointer table (one column per layer); absent tensors (bias, q/k norms) are 0
TABLE_ROWS = ("in_norm", "qkv", "qkv_bias", "q_norm", "k_norm", "o", "post_norm", "gate_up", "down", "kv_cache")


@triton.jit
def _table_ptr(tab_ptr, row: tl.constexpr, L, like):
    """Layer pointer `row` of the current column (tab_ptr points at it) as `like`'s pointer type, 16-byte aligned
    (every table entry is a tensor's base address)."""
    return tl.multiple_of(tl.load(tab_ptr + row * L).to(like.dtype), 16)


@triton.jit(do_not_specialize=["num_splits", "L"])
def _model_bs1_kernel(
    tab_ptr, L, x_ptr, cache0_ptr, h1_ptr, qkv_ptr, cs_ptr, slot_ptr, seq_lens_ptr, bt_ptr, attn_ptr,
    mid_o_ptr, mid_lse_ptr, cnt_ptr, o_ptr, act_ptr, h2_ptr, y_ptr, bar_ptr,
    eps, qk_eps, scale, num_splits,
    stride_cs, stride_c_kv, stride_c_blk, stride_c_tok, stride_c_h,
    H: tl.constexpr, BLOCK_H: tl.constexpr, NQKV: tl.constexpr, Hq: tl.constexpr, Hkv: tl.constexpr,
    G: tl.constexpr, D: tl.constexpr, HALF: tl.constexpr, ROT: tl.constexpr, INTER: tl.constexpr,
    BLOCK_QO: tl.constexpr, BLOCK_I: tl.constexpr, PAGE: tl.constexpr,
    RA: tl.constexpr, BLOCK_RA: tl.constexpr, RO: tl.constexpr, BLOCK_RO: tl.constexpr,
    RG: tl.constexpr, BLOCK_RG: tl.constexpr, RD: tl.constexpr, BLOCK_RD: tl.constexpr,
    BLOCK_G: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr, PREC: tl.constexpr,
    LSE_S: tl.constexpr, MERGE_S: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_NORM: tl.constexpr,
    NPROG: tl.constexpr, PDL: tl.constexpr, EARLY: tl.constexpr, ATTN_EARLY: tl.constexpr,
):
    """All L layers for one decode token in one launch: layer l's five phases (_layer_phases) with its pointers
    from column l of tab [TABLE_ROWS, L], a grid barrier between layers too. The first layer reads x (the residual
    stream itself); each later one the previous layer's y and h2. cache0_ptr (layer 0's cache) only types the cache
    pointers. Every program's next-layer weight rows and first attention tile load
    before the barrier that ends the previous layer."""
    pdl_trigger(PDL)
    pid = tl.program_id(0)
    for layer in range(L):
        col = tab_ptr + layer
        if layer == 0:
            xin = x_ptr
        else:
            xin = y_ptr
        _layer_phases(
            pid, layer == 0, xin, h2_ptr, h1_ptr, _table_ptr(col, 0, L, x_ptr), _table_ptr(col, 1, L, x_ptr),
            _table_ptr(col, 2, L, x_ptr), qkv_ptr, cs_ptr, _table_ptr(col, 9, L, cache0_ptr), slot_ptr,
            _table_ptr(col, 3, L, x_ptr), _table_ptr(col, 4, L, x_ptr), seq_lens_ptr, bt_ptr, attn_ptr, mid_o_ptr,
            mid_lse_ptr, cnt_ptr, _table_ptr(col, 5, L, x_ptr), o_ptr, _table_ptr(col, 6, L, x_ptr),
            _table_ptr(col, 7, L, x_ptr), act_ptr, h2_ptr, _table_ptr(col, 8, L, x_ptr), y_ptr, bar_ptr, eps, qk_eps,
            scale, num_splits, stride_cs, stride_c_kv, stride_c_blk, stride_c_tok, stride_c_h, H, BLOCK_H, NQKV, Hq,
            Hkv, G, D, HALF, ROT, INTER, BLOCK_QO, BLOCK_I, PAGE, RA, BLOCK_RA, RO, BLOCK_RO, RG, BLOCK_RG, RD,
            BLOCK_RD, BLOCK_G, BLOCK_D, BLOCK_N, PREC, LSE_S, MERGE_S, True, HAS_BIAS, HAS_NORM, NPROG, 0, 4, PDL,
            EARLY, ATTN_EARLY, True)


_TABLES: dict[tuple, torch.Tensor] = {}
_MAX_TABLES = 8


def pointer_table(layers: list[LayerBs1Weights], kv_caches: list[torch.Tensor]) -> torch.Tensor:
    """The model kernel's int64 table [len(TABLE_ROWS), L] of the layers' tensor addresses (0 for an absent bias or
    norm), cached per set of addresses (a CUDA graph bakes the table's address in: the same weights and caches get
    the same table). Built outside CUDA-graph capture (the first launch runs eagerly); the tensors must outlive
    every launch that uses it, as the model's parameters and bound caches do."""
    cols = [[t.data_ptr() if t is not None else 0
             for t in (lw.in_norm, lw.qkv, lw.qkv_bias, lw.q_norm, lw.k_norm, lw.o, lw.post_norm, lw.gate_up,
                       lw.down, cache)]
            for lw, cache in zip(layers, kv_caches)]
    dev = kv_caches[0].device
    key = (str(dev), *(p for col in cols for p in col))
    if key not in _TABLES:
        if dev.type == "cuda" and torch.cuda.is_current_stream_capturing():
            raise NeedsEagerRun("layer_bs1 pointer table: build it with an eager launch before capture")
        while len(_TABLES) >= _MAX_TABLES:
            _TABLES.pop(next(iter(_TABLES)))
        _TABLES[key] = torch.tensor(cols, dtype=torch.int64).T.contiguous().to(dev)
    return _TABLES[key]


def decoder_model_bs1_ref(x: torch.Tensor, layers: list[LayerBs1Weights], kv_caches: list[torch.Tensor],
                          cos_sin_cache: torch.Tensor, slot_mapping: torch.Tensor, seq_lens: torch.Tensor,
                          block_tables: torch.Tensor, max_seq_len: int,
                          num_programs: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Plain torch: decoder_layer_bs1_ref through every layer, the first without a residual -> (the last layer's
    MLP output, its residual stream after attention), what the model's layer loop hands to the final norm."""
    residual = None
    for lw, cache in zip(layers, kv_caches, strict=True):
        x, residual = decoder_layer_bs1_ref(x, residual, lw, cache, cos_sin_cache, slot_mapping, seq_lens,
                                            block_tables, max_seq_len)
    return x, residual


def decoder_model_bs1_triton(x: torch.Tensor, layers: list[LayerBs1Weights], kv_caches: list[torch.Tensor],
                             cos_sin_cache: torch.Tensor, slot_mapping: torch.Tensor, seq_lens: torch.Tensor,
                             block_tables: torch.Tensor, max_seq_len: int,
                             num_programs: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Triton: every layer in one launch of num_programs (default: the multiprocessor count) programs
    (_model_bs1_kernel). The layers must share one shape and dtype, and their caches one layout."""
    if len(layers) != len(kv_caches) or not layers:
        raise ValueError(f"layers ({len(layers)}) and kv_caches ({len(kv_caches)}) must pair up, at least one")
    lw0, cache0 = layers[0], kv_caches[0]
    for lw, cache in zip(layers, kv_caches):
        _check(x, None, lw, cache)
        same_options = (lw.qkv_bias is None) == (lw0.qkv_bias is None) and (lw.q_norm is None) == (lw0.q_norm is None)
        if cache.shape != cache0.shape or cache.dtype != cache0.dtype or not same_options:
            raise ValueError("layers: every layer and cache must share the first one's shapes, dtypes and options")
    consts, sc = _prepare(x, lw0, cache0, cos_sin_cache, block_tables, max_seq_len, num_programs, True)
    table = pointer_table(layers, kv_caches)
    h1, h2, y = torch.empty_like(x), torch.empty_like(x), torch.empty_like(x)
    _model_bs1_kernel[(sc["nprog"],)](
        table, len(layers), x, cache0, h1, sc["qkv"], cos_sin_cache, slot_mapping, seq_lens, block_tables,
        sc["attn"], sc["mid_o"], sc["mid_lse"], sc["cnt"], sc["o"], sc["act"], h2, y, sc["bar"], lw0.eps, lw0.qk_eps,
        lw0.scale, sc["splits"], cos_sin_cache.stride(0), cache0.stride(0), cache0.stride(1), cache0.stride(2),
        cache0.stride(3), **consts)
    return y, h2
