"""A mixed step's attention in one launch: running decodes (one query each) beside one or more prompt chunks.

Why: run as two launches (the decode kernel, then the prefill kernel over the chunks), the chunks' few programs
start only once the last decode program has finished, and each walks its keys alone, so a chunk of a few hundred
tokens adds its whole latency to the step (engine/mixed_graph.py's steps). In one grid the chunk programs run beside
the decode programs, heaviest first.

Contract (reference and Triton entry point alike): q [T, Hq, D]; kv_cache as attention.py's. The decode part:
decode_qsl int32 [Nd+1] (decode sequence b's one query is row decode_qsl[b]), decode_seq_lens, decode_block_tables
[Nd, ...], optionally decode_order int32 [Nd] (a permutation: the order the decode programs run in). The chunk part:
chunk_qsl int32 [Nc+1], chunk_seq_lens, chunk_block_tables [Nc, ...]; max_chunk_len bounds every chunk's query
count (the grid: a CUDA graph captures it). The chunks' rows start at chunk_qsl[0], and a
decode sequence whose row is at or past it is not attended (the mixed step's padding decode sequences, whose rows
carry chunk tokens): rows [chunk_qsl[0], chunk_qsl[Nc]) hold the chunks' outputs, the rows of the attended decode
sequences theirs, and no other row is written. The result equals attention.py's attention over each part.
"""

import torch

from tachyon.kernels._triton import next_pow2, pdl_args, pdl_trigger, pdl_wait, require_triton, tl, triton
from tachyon.kernels.attention import _decode_split, attention_ref
from tachyon.kernels.attention_config import attention_pdl, kv8_widen, mixed_chunk_config, mixed_decode_config
from tachyon.kernels.attention_prefill import LOG2E, _prefill_block


def mixed_attention_ref(
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
    """attention_ref over the attended decode sequences (a prefix of the decode part: rows before chunk_qsl[0]),
    then over the chunks. decode_order only orders the Triton kernel's programs: here it is ignored."""
    if out is None:
        out = torch.empty_like(q)
    first = int(chunk_qsl[0])
    n = int((decode_qsl[:-1] < first).sum())
    if n:
        attention_ref(q, kv_cache, decode_qsl[: n + 1], decode_seq_lens[:n], decode_block_tables[:n], 1, max_seq_len,
                      scale, out=out)
    if int(chunk_qsl[-1]) > first:
        attention_ref(q, kv_cache, chunk_qsl, chunk_seq_lens, chunk_block_tables, max_chunk_len, max_seq_len, scale,
                      out=out)
    return out


# chunk_blocks and the block-table strides vary from one mixed graph to the next: specialising on them would compile a
# variant per graph key at start-up (H200, 7B, empty Triton cache: 39-67 s of graph capture with CHUNK_BLOCKS a
# constexpr, against 3-5 s)
@triton.jit(do_not_specialize=["chunk_blocks", "stride_bt_d", "stride_bt_c"])
def _mixed_kernel(
    q_ptr, cache_ptr, out_ptr, dqsl_ptr, dseq_ptr, dbt_ptr, dord_ptr, cqsl_ptr, cseq_ptr, cbt_ptr, scale, scale_log2,
    stride_qt, stride_qh, stride_ot, stride_oh, stride_c_kv, stride_c_blk, stride_c_tok, stride_c_h,
    stride_bt_d, stride_bt_c, chunk_blocks,
    G: tl.constexpr, D: tl.constexpr, PAGE: tl.constexpr, NUM_CHUNKS: tl.constexpr,
    BLOCK_Q: tl.constexpr, BLOCK_GP: tl.constexpr, BLOCK_NP: tl.constexpr, BLOCK_GD: tl.constexpr,
    BLOCK_ND: tl.constexpr, BLOCK_D: tl.constexpr, PREC: tl.constexpr, PDL: tl.constexpr, ORDERED: tl.constexpr,
    WIDEN: tl.constexpr = 0,
):
    """Programs: first NUM_CHUNKS * chunk_blocks chunk programs (query block qb of chunk c, the last blocks of every
    chunk first: they have the most keys), then one per decode sequence, in batch order or, when ORDERED, in
    dord_ptr's order. The KV head is axis 1 (axis 0 when ORDERED: every head of a program index is dispatched
    before the next index, so the whole launch runs heaviest first). Step inputs (query start locations, sequence
    lengths, block tables, the order: no kernel writes them) are read before pdl_wait; a program with no work
    returns without waiting. WIDEN: how the decode programs widen an e4m3 cache's tiles (attention._attend_tile's)."""
    pdl_trigger(PDL)
    if ORDERED:
        pid = tl.program_id(1)
        hk = tl.program_id(0)
    else:
        pid = tl.program_id(0)
        hk = tl.program_id(1)
    if pid < NUM_CHUNKS * chunk_blocks:
        qb = chunk_blocks - 1 - pid // NUM_CHUNKS
        c = pid % NUM_CHUNKS
        q_start = tl.load(cqsl_ptr + c)
        q_len = tl.load(cqsl_ptr + c + 1) - q_start
        if qb * BLOCK_Q < q_len:
            S = tl.load(cseq_ptr + c)
            pdl_wait(PDL)
            _prefill_block(
                q_ptr, cache_ptr, out_ptr, q_start, q_len, S, cbt_ptr + c * stride_bt_c, qb, hk, scale_log2,
                stride_qt, stride_qh, stride_ot, stride_oh, stride_c_kv, stride_c_blk, stride_c_tok, stride_c_h,
                G, D, PAGE, BLOCK_Q, BLOCK_GP, BLOCK_NP, BLOCK_D, PREC,
            )
    else:
        b = pid - NUM_CHUNKS * chunk_blocks
        if ORDERED:
            b = tl.load(dord_ptr + b)
        row = tl.load(dqsl_ptr + b)
        if row < tl.load(cqsl_ptr):
            S = tl.load(dseq_ptr + b)
            g = tl.arange(0, BLOCK_GD)
            d = tl.arange(0, BLOCK_D)
            gmask = g < G
            dmask = d < D
            heads = hk * G + g
            tok = row.to(tl.int64)
            pdl_wait(PDL)
            o, m_i, l_i = _decode_split(
                q_ptr, cache_ptr, dbt_ptr + b * stride_bt_d, scale, tok, hk, 0, S, g, heads, gmask, d, dmask,
                stride_qt, stride_qh, stride_c_kv, stride_c_blk, stride_c_tok, stride_c_h,
                PAGE, BLOCK_GD, BLOCK_D, BLOCK_ND, PREC, WIDEN,
            )
            dst = out_ptr + tok * stride_ot + heads[:, None] * stride_oh + d[None, :]
            tl.store(dst, o.to(out_ptr.dtype.element_ty), mask=gmask[:, None] & dmask[None, :])


def mixed_tiles(dtype: torch.dtype, group: int) -> tuple[dict, dict, int]:
    """The launch choices of _mixed_kernel, which alone set its compiled variant (with the model's head layout): the
    decode programs' config (attention_config.mixed_decode_config), the chunk programs'
    (attention_config.mixed_chunk_config) and the query tokens a chunk program takes. None depends on the step, so a
    model compiles one variant per dtype (over an e4m3 cache the widening is fixed too: attention_config.kv8_widen
    gives the mixed launch cvt unless TACHYON_KV8_WIDEN forces a mode)."""
    key = "fp32" if dtype == torch.float32 else "bf16"
    block_g = next_pow2(group)
    pre = mixed_chunk_config(key)
    return mixed_decode_config(key), pre, max(1, pre["BLOCK_M"] // block_g, 16 // block_g)


def mixed_attention_triton(
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
    """Triton: one launch of _mixed_kernel. The decode programs take the decode kernel's key tile, the chunk programs
    mixed_chunk_config's tiles (its warps and stages for the whole launch); max_chunk_len sets the chunk programs'
    count only. No split-KV. decode_order (int32 [Nd], a permutation of the decode sequences, heaviest first) sets the
    order the decode programs are dispatched in, heads fastest; the result does not depend on it."""
    require_triton()
    T, Hq, D = q.shape
    Hkv, page = kv_cache.shape[3], kv_cache.shape[2]
    assert Hq % Hkv == 0 and q.stride(-1) == 1 and kv_cache.is_contiguous()
    G = Hq // Hkv
    if out is None:
        out = torch.empty_like(q)
    nd, nc = decode_seq_lens.shape[0], chunk_seq_lens.shape[0]
    if T == 0 or nd + nc == 0:
        return out
    dec, pre, BLOCK_Q = mixed_tiles(q.dtype, G)
    BLOCK_GP = next_pow2(G)
    chunk_blocks = triton.cdiv(max(max_chunk_len, 1), BLOCK_Q) if nc else 0
    ordered = decode_order is not None
    programs = nc * chunk_blocks + nd
    _mixed_kernel[(Hkv, programs) if ordered else (programs, Hkv)](
        q, kv_cache, out, decode_qsl, decode_seq_lens, decode_block_tables,
        decode_order if ordered else decode_seq_lens, chunk_qsl, chunk_seq_lens,
        chunk_block_tables, scale, scale * LOG2E,
        q.stride(0), q.stride(1), out.stride(0), out.stride(1),
        kv_cache.stride(0), kv_cache.stride(1), kv_cache.stride(2), kv_cache.stride(3),
        decode_block_tables.stride(0), chunk_block_tables.stride(0), chunk_blocks,
        G=G, D=D, PAGE=page, NUM_CHUNKS=nc, BLOCK_Q=BLOCK_Q, BLOCK_GP=BLOCK_GP,
        BLOCK_NP=pre["BLOCK_N"], BLOCK_GD=max(16, next_pow2(G)), BLOCK_ND=dec["BLOCK_N"], BLOCK_D=max(16, next_pow2(D)),
        PREC="ieee" if q.dtype == torch.float32 else "tf32", num_warps=pre["num_warps"],
        num_stages=pre["num_stages"], ORDERED=ordered, WIDEN=kv8_widen(kv_cache.dtype, q.device),
        **pdl_args(q.device, attention_pdl()),
    )
    return out
