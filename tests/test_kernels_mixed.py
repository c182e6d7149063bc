"""The one-launch mixed-step attention (kernels/attention_mixed.py) against its reference and against a float64
SDPA oracle, on steps laid out as engine/mixed_graph.py lays them out: d decode rows, padding decode sequences up
to the decode bucket whose rows carry the chunks' tokens, then one or two chunks (the end of one prompt over its
cached prefix, the start of the next), and padding rows after them. Triton runs under the interpreter on CPU."""

import importlib
import math

import pytest
import torch

from tests.kernel_env import DEV, DTYPES, NAN, K, needs_triton, tol

attn_cfg = importlib.import_module("tachyon.kernels.attention_config")


def mixed_step(decode_ctx, chunks, bucket, rows, Hq, Hkv, D, page, dtype, gen):
    """decode_ctx: each real decode's sequence length; chunks: [(cached, new)]; bucket >= len(decode_ctx): the decode
    part's sequences (the rest padding: one key, block 0); rows: the step's row count (>= bucket, >= the chunks'
    end). Returns q, the cache, the two parts' tensors, the chunk bound and a float64 oracle of every covered row."""
    d = len(decode_ctx)
    lens = list(decode_ctx) + [c + n for c, n in chunks]
    blocks = [-(-s // page) for s in lens]
    num_blocks = sum(blocks) + 2
    perm = torch.randperm(num_blocks, generator=gen)
    cache = torch.randn(2, num_blocks, page, Hkv, D, generator=gen).to(dtype)
    max_blk = max(blocks)
    tables, used = torch.zeros(len(lens), max_blk, dtype=torch.int32), 0
    for i, nb in enumerate(blocks):
        tables[i, :nb] = perm[used:used + nb].to(torch.int32)
        used += nb
    q = torch.randn(rows, Hq, D, generator=gen).to(dtype)
    # the decode part: `bucket` sequences over rows 0..bucket-1 (padding: one key in block 0)
    dec_tables = torch.zeros(bucket, max_blk, dtype=torch.int32)
    dec_tables[:d] = tables[:d]
    dec_lens = torch.ones(bucket, dtype=torch.int32)
    dec_lens[:d] = torch.tensor(decode_ctx, dtype=torch.int32)
    dec_qsl = torch.arange(bucket + 1, dtype=torch.int32)
    qsl = [d]
    for _, n in chunks:
        qsl.append(qsl[-1] + n)
    qsl += [qsl[-1]] * (2 - len(chunks))  # an absent chunk: no query rows
    chunk_lens = torch.tensor([c + n for c, n in chunks] + [1] * (2 - len(chunks)), dtype=torch.int32)
    chunk_tables = torch.zeros(2, max_blk, dtype=torch.int32)
    chunk_tables[:len(chunks)] = tables[d:]
    parts = dict(decode_qsl=dec_qsl, decode_seq_lens=dec_lens, decode_block_tables=dec_tables,
                 chunk_qsl=torch.tensor(qsl, dtype=torch.int32), chunk_seq_lens=chunk_lens,
                 chunk_block_tables=chunk_tables)
    # oracle: each covered row's attention over its sequence's keys read back from the cache, float64
    flat = cache.double().reshape(2, num_blocks * page, Hkv, D)
    oracle, covered = torch.full((rows, Hq, D), NAN, dtype=torch.float64), []
    seqs = [(i, decode_ctx[i] - 1, 1, i) for i in range(d)]
    seqs += [(d + j, c, n, qsl[j]) for j, (c, n) in enumerate(chunks)]
    for seq, ctx, n, row in seqs:
        S = ctx + n
        slots = (tables[seq].long()[torch.arange(S) // page] * page + torch.arange(S) % page)
        k = flat[0, slots].repeat_interleave(Hq // Hkv, dim=1).permute(1, 0, 2)  # [Hq, S, D]
        v = flat[1, slots].repeat_interleave(Hq // Hkv, dim=1).permute(1, 0, 2)
        qq = q[row:row + n].double().permute(1, 0, 2)
        mask = torch.arange(S)[None, :] <= (ctx + torch.arange(n))[:, None]
        o = torch.nn.functional.scaled_dot_product_attention(qq[None], k[None], v[None], attn_mask=mask)[0]
        oracle[row:row + n] = o.permute(1, 0, 2)
        covered += range(row, row + n)
    to = {k: v.to(DEV) for k, v in parts.items()}
    bound = rows  # the mixed graphs' chunk part: max_query_len is the step's row count
    return q.to(DEV), cache.to(DEV), to, bound, int(max(lens)), oracle, sorted(covered)


STEPS = [
    # (decode contexts, chunks, bucket, rows)
    ([40, 9, 77, 18, 2], [(30, 11), (0, 13)], 8, 8 + 24),       # two chunks: a prompt's end, the next's start
    ([21, 64, 3], [(0, 40)], 4, 4 + 44),                         # one chunk, padding rows after it
    ([33, 12, 50, 7, 70, 5, 16, 1 + 1], [(17, 6)], 8, 8 + 16),   # a full decode bucket; a short cut chunk
    ([5], [(64, 3), (0, 2)], 8, 8 + 8),                         # one decode, chunks in the bucket's padding rows
]


@needs_triton
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("Hq,Hkv,D,page", [(8, 2, 32, 8), (6, 3, 48, 16), (14, 2, 32, 4)])
@pytest.mark.parametrize("step", range(len(STEPS)))
def test_mixed_attention_matches_reference_and_oracle(dtype, Hq, Hkv, D, page, step):
    gen = torch.Generator().manual_seed(10 + step)
    ctx, chunks, bucket, rows = STEPS[step]
    q, cache, parts, bound, max_seq, oracle, covered = mixed_step(ctx, chunks, bucket, rows, Hq, Hkv, D, page,
                                                                 dtype, gen)
    scale = 1.0 / math.sqrt(D)
    out = K.mixed_attention_triton(q, cache, **parts, max_chunk_len=bound, max_seq_len=max_seq, scale=scale,
                                   out=torch.full_like(q, NAN))
    ref = K.mixed_attention_ref(q, cache, **parts, max_chunk_len=bound, max_seq_len=max_seq, scale=scale,
                                out=torch.full_like(q, NAN))
    rows_in = torch.tensor(covered)
    outside = torch.ones(rows, dtype=torch.bool)
    outside[rows_in] = False
    # exactly the covered rows are written, by both
    assert not torch.isnan(out[rows_in.to(DEV)]).any(), "a covered row was not written"
    assert torch.isnan(out.cpu()[outside]).all(), "a row outside both parts was written"
    assert torch.isnan(ref.cpu()[outside]).all()
    torch.testing.assert_close(out[rows_in.to(DEV)].float(), ref[rows_in.to(DEV)].float(), **tol(dtype))
    torch.testing.assert_close(ref.cpu()[rows_in].double(), oracle[rows_in], **tol(dtype))


@needs_triton
def test_mixed_attention_equals_two_part_attention():
    """The mixed graphs' two-launch form (decode kernel over every decode sequence, then the prefill kernel over the
    chunks, into one output) gives the same covered rows."""
    gen = torch.Generator().manual_seed(3)
    q, cache, p, bound, max_seq, _, covered = mixed_step(*STEPS[0], 8, 2, 32, 8, torch.float32, gen)
    scale = 1.0 / math.sqrt(32)
    one = K.mixed_attention_triton(q, cache, **p, max_chunk_len=bound, max_seq_len=max_seq, scale=scale)
    two = torch.full_like(q, NAN)
    K.attention_triton(q, cache, p["decode_qsl"], p["decode_seq_lens"], p["decode_block_tables"], 1, max_seq, scale,
                       out=two)
    K.attention_triton(q, cache, p["chunk_qsl"], p["chunk_seq_lens"], p["chunk_block_tables"], bound, max_seq, scale,
                       out=two)
    rows = torch.tensor(covered, device=q.device)
    torch.testing.assert_close(one[rows], two[rows], **tol(torch.float32))


def test_mixed_one_launch_knob(monkeypatch):
    """One launch unless TACHYON_MIXED_ATTN=two; a bad value names the knob."""
    monkeypatch.delenv("TACHYON_MIXED_ATTN", raising=False)
    assert attn_cfg.mixed_one_launch()
    monkeypatch.setenv("TACHYON_MIXED_ATTN", "one")
    assert attn_cfg.mixed_one_launch()
    monkeypatch.setenv("TACHYON_MIXED_ATTN", "two")
    assert not attn_cfg.mixed_one_launch()
    monkeypatch.setenv("TACHYON_MIXED_ATTN", "1")
    with pytest.raises(ValueError, match="TACHYON_MIXED_ATTN"):
        attn_cfg.mixed_one_launch()


@needs_triton
@pytest.mark.parametrize("Hq,Hkv", [(14, 2), (8, 4)])  # groups of 7 and 2: 16 and 64 tokens a chunk program
def test_mixed_attention_bf16_chunk_tile(monkeypatch, Hq, Hkv):
    """The bf16 chunk tile (MIXED_CHUNK_CONFIG_BF16), forced through TACHYON_MIXED_CHUNK_TILE so the CPU interpreter
    runs it in fp32, gives the reference's rows on a step whose chunks span several of its query blocks; a malformed
    value names the knob."""
    tile = "{BLOCK_M}:{BLOCK_N}:{num_warps}:{num_stages}".format(**attn_cfg.MIXED_CHUNK_CONFIG_BF16)
    monkeypatch.setenv("TACHYON_MIXED_CHUNK_TILE", tile)
    gen = torch.Generator().manual_seed(21)
    step = ([40, 9, 77, 18, 2], [(30, 70), (0, 45)], 8, 8 + 120)
    q, cache, p, bound, max_seq, oracle, covered = mixed_step(*step, Hq, Hkv, 32, 8, torch.float32, gen)
    scale = 1.0 / math.sqrt(32)
    out = K.mixed_attention_triton(q, cache, **p, max_chunk_len=bound, max_seq_len=max_seq, scale=scale,
                                   out=torch.full_like(q, NAN))
    rows = torch.tensor(covered)
    torch.testing.assert_close(out.cpu()[rows].double(), oracle[rows], **tol(torch.float32))
    monkeypatch.setenv("TACHYON_MIXED_CHUNK_TILE", "128:32:4")
    with pytest.raises(ValueError, match="TACHYON_MIXED_CHUNK_TILE"):
        K.mixed_attention_triton(q, cache, **p, max_chunk_len=bound, max_seq_len=max_seq, scale=scale)


def test_mixed_chunk_config_is_one_per_dtype(monkeypatch):
    """The chunk programs' tile does not follow the step (one compiled variant per dtype and head layout): bf16 takes
    MIXED_CHUNK_CONFIG_BF16, fp32 the fp32 prefill tile, and the knob overrides both."""
    monkeypatch.delenv("TACHYON_MIXED_CHUNK_TILE", raising=False)
    assert attn_cfg.mixed_chunk_config("bf16") == attn_cfg.MIXED_CHUNK_CONFIG_BF16
    assert attn_cfg.mixed_chunk_config("fp32") == attn_cfg.PREFILL_CONFIG_FP32
    monkeypatch.setenv("TACHYON_MIXED_CHUNK_TILE", "64:64:4:2")
    want = dict(BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=2)
    assert attn_cfg.mixed_chunk_config("bf16") == want == attn_cfg.mixed_chunk_config("fp32")


@needs_triton
@pytest.mark.parametrize("block_n", [16, 64])
def test_mixed_attention_decode_tile_knob(monkeypatch, block_n):
    """TACHYON_MIXED_DECODE_TILE sets the decode programs' key tile (contexts then span several tiles, or end inside
    one): the rows stay the reference's; a value that is not a power of two >= 16 names the knob."""
    monkeypatch.setenv("TACHYON_MIXED_DECODE_TILE", str(block_n))
    assert attn_cfg.mixed_decode_config("bf16")["BLOCK_N"] == block_n
    gen = torch.Generator().manual_seed(22)
    q, cache, p, bound, max_seq, oracle, covered = mixed_step(*STEPS[0], 8, 4, 32, 8, torch.float32, gen)
    scale = 1.0 / math.sqrt(32)
    out = K.mixed_attention_triton(q, cache, **p, max_chunk_len=bound, max_seq_len=max_seq, scale=scale,
                                   out=torch.full_like(q, NAN))
    rows = torch.tensor(covered)
    torch.testing.assert_close(out.cpu()[rows].double(), oracle[rows], **tol(torch.float32))
    for bad in ("48", "8", "x"):
        monkeypatch.setenv("TACHYON_MIXED_DECODE_TILE", bad)
        with pytest.raises(ValueError, match="TACHYON_MIXED_DECODE_TILE"):
            attn_cfg.mixed_decode_config("bf16")


@needs_triton
@pytest.mark.parametrize("Hq,Hkv", [(14, 2), (8, 4)])
def test_mixed_attention_decode_order_leaves_the_result(Hq, Hkv):
    """Programs dispatched in a given decode order (heads fastest) write exactly the rows, and the values, of the batch
    order: longest first and a shuffled order alike."""
    gen = torch.Generator().manual_seed(4)
    q, cache, p, bound, max_seq, _, covered = mixed_step(*STEPS[0], Hq, Hkv, 32, 8, torch.float32, gen)
    scale = 1.0 / math.sqrt(32)
    args = dict(max_chunk_len=bound, max_seq_len=max_seq, scale=scale)
    base = K.mixed_attention_triton(q, cache, **p, **args, out=torch.full_like(q, NAN))
    lens = p["decode_seq_lens"].cpu()
    for order in (torch.argsort(-lens, stable=True), torch.randperm(len(lens), generator=gen)):
        out = K.mixed_attention_triton(q, cache, **p, **args, out=torch.full_like(q, NAN),
                                       decode_order=order.to(torch.int32).to(DEV))
        assert torch.equal(torch.isnan(out), torch.isnan(base)), "the same rows are written"
        rows = torch.tensor(covered, device=out.device)
        torch.testing.assert_close(out[rows], base[rows], rtol=0, atol=0)


def test_mixed_decode_order_knob(monkeypatch):
    """Longest first unless TACHYON_MIXED_ORDER=batch; a bad value names the knob."""
    monkeypatch.delenv("TACHYON_MIXED_ORDER", raising=False)
    assert attn_cfg.mixed_decode_order()
    monkeypatch.setenv("TACHYON_MIXED_ORDER", "batch")
    assert not attn_cfg.mixed_decode_order()
    monkeypatch.setenv("TACHYON_MIXED_ORDER", "lpt")
    assert attn_cfg.mixed_decode_order()
    monkeypatch.setenv("TACHYON_MIXED_ORDER", "longest")
    with pytest.raises(ValueError, match="TACHYON_MIXED_ORDER"):
        attn_cfg.mixed_decode_order()


def test_attention_pdl_rule(monkeypatch):
    """Unsplit decode launches of at most DECODE_NO_PDL_PROGRAMS_PER_SM programs a SM launch without PDL; larger
    ones and every other launch keep it; TACHYON_ATTN_PDL=1 / 0 forces it for all; a bad value names the knob."""
    monkeypatch.delenv("TACHYON_ATTN_PDL", raising=False)
    wave = attn_cfg.DECODE_NO_PDL_PROGRAMS_PER_SM * 132
    assert not attn_cfg.attention_pdl(64 * 4, 132)  # long64's 7B decode steps (session40: +1.5%)
    assert attn_cfg.attention_pdl(96 * 4, 132)  # 96 sequences: PDL kept (session41: the rule cost 0.3% there)
    assert not attn_cfg.attention_pdl(wave, 132)
    assert attn_cfg.attention_pdl(wave + 1, 132)
    assert attn_cfg.attention_pdl(None, 132)
    monkeypatch.setenv("TACHYON_ATTN_PDL", "1")
    assert attn_cfg.attention_pdl(4, 132)
    monkeypatch.setenv("TACHYON_ATTN_PDL", "0")
    assert not attn_cfg.attention_pdl(None, 132) and not attn_cfg.attention_pdl(wave + 1, 132)
    monkeypatch.setenv("TACHYON_ATTN_PDL", "off")
    with pytest.raises(ValueError, match="TACHYON_ATTN_PDL"):
        attn_cfg.attention_pdl(4, 132)
