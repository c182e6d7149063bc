"""The attention kernels (decode, split-KV, prefill/extend) against their reference (Triton under the interpreter
when there is no GPU), and the attention reference against a dense causal SDPA oracle. The element-wise kernels are
in test_kernels_elementwise.py, the one-launch mixed-step attention in test_kernels_mixed.py."""

import importlib
import math

import pytest
import torch

from tests.kernel_env import (
    DEV,
    DTYPES,
    MERGE_MODES,
    NAN,
    K,
    assert_counters_zero,
    close,
    needs_triton,
    set_merge_mode,
)

split_mod = importlib.import_module("tachyon.kernels.split_kv")
attn_cfg = importlib.import_module("tachyon.kernels.attention_config")
# log(0) = -inf of an empty KV split is intended; the interpreter warns about it
pytestmark = pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")


# ---------------------------------------------------------------- paged batch construction


def make_batch(specs, Hq, Hkv, D, block_size, dtype, gen, extra_blocks=3):
    """specs: [(cached_len, query_len)]. Returns q, kv_cache, metadata, dense per-seq K/V."""
    blocks_per = [-(-(c + n) // block_size) for c, n in specs]
    num_blocks = sum(blocks_per) + extra_blocks
    perm = torch.randperm(num_blocks, generator=gen)
    kv_cache = torch.randn(2, num_blocks, block_size, Hkv, D, generator=gen).to(dtype)
    max_blk = max(blocks_per)
    block_tables = torch.zeros(len(specs), max_blk, dtype=torch.int32)
    dense, used = [], 0
    for b, (c, n) in enumerate(specs):
        ids = perm[used : used + blocks_per[b]]
        used += blocks_per[b]
        block_tables[b, : len(ids)] = ids.to(torch.int32)
        S = c + n
        slots = ids.repeat_interleave(block_size) * block_size + torch.arange(block_size).repeat(len(ids))
        slots = slots[:S]
        k = torch.randn(S, Hkv, D, generator=gen).to(dtype)
        v = torch.randn(S, Hkv, D, generator=gen).to(dtype)
        kv_cache[0].view(-1, Hkv, D)[slots] = k
        kv_cache[1].view(-1, Hkv, D)[slots] = v
        dense.append((k, v))
    q_lens = [n for _, n in specs]
    qsl = torch.tensor([0] + q_lens, dtype=torch.int32).cumsum(0).to(torch.int32)
    seq_lens = torch.tensor([c + n for c, n in specs], dtype=torch.int32)
    q = torch.randn(int(qsl[-1]), Hq, D, generator=gen).to(dtype)
    meta = dict(
        query_start_loc=qsl.to(DEV), seq_lens=seq_lens.to(DEV), block_tables=block_tables.to(DEV),
        max_query_len=max(q_lens), max_seq_len=int(seq_lens.max()), scale=1.0 / math.sqrt(D),
    )
    return q.to(DEV), kv_cache.to(DEV), meta, dense


def sdpa_oracle(q, dense, specs, Hq, Hkv):
    """Dense causal SDPA per sequence in float64 (causal mask offset by the cached length)."""
    outs, start = [], 0
    for (c, n), (k, v) in zip(specs, dense, strict=True):
        qb = q[start : start + n].double().cpu().permute(1, 0, 2).unsqueeze(0)  # [1, Hq, n, D]
        kb = k.double().repeat_interleave(Hq // Hkv, dim=1).permute(1, 0, 2).unsqueeze(0)
        vb = v.double().repeat_interleave(Hq // Hkv, dim=1).permute(1, 0, 2).unsqueeze(0)
        mask = torch.arange(c + n).unsqueeze(0) <= (c + torch.arange(n)).unsqueeze(1)
        o = torch.nn.functional.scaled_dot_product_attention(qb, kb, vb, attn_mask=mask)
        outs.append(o[0].permute(1, 0, 2))
        start += n
    return torch.cat(outs)


MIXED = [(0, 7), (20, 1), (33, 5), (0, 1), (15, 17), (47, 1), (16, 16), (5, 3)]
DECODE = [(0, 1), (18, 1), (63, 1), (100, 1), (31, 1)]


@pytest.mark.parametrize("query_rows", [1024, 4])  # 4: the reference's query blocks split most sequences here
@pytest.mark.parametrize("Hq,Hkv,D,block_size", [(4, 4, 32, 16), (8, 2, 64, 16), (6, 2, 48, 8)])
def test_attention_ref_matches_sdpa(Hq, Hkv, D, block_size, query_rows, monkeypatch):
    # the module by import path: the package exports a function named `attention`, which hides it as an attribute
    monkeypatch.setattr(importlib.import_module("tachyon.kernels.attention"), "_REF_QUERY_ROWS", query_rows)
    gen = torch.Generator().manual_seed(0)
    q, cache, meta, dense = make_batch(MIXED, Hq, Hkv, D, block_size, torch.float32, gen)
    out = K.attention_ref(q, cache, **meta)
    ref = sdpa_oracle(q, dense, MIXED, Hq, Hkv)
    torch.testing.assert_close(out.double().cpu(), ref, rtol=1e-5, atol=1e-5)



@pytest.mark.parametrize("decode_keys", [1 << 16, 128, 1])  # one group; groups of a few sequences; one each
@pytest.mark.parametrize("Hq,Hkv,D,block_size", [(8, 2, 64, 16), (6, 2, 48, 8), (4, 4, 32, 16)])
def test_attention_ref_decode_batch_matches_sdpa(Hq, Hkv, D, block_size, decode_keys, monkeypatch):
    """The reference's batched decode path: sequences padded to their group's longest context. Every cache slot
    no sequence owns is NaN and the block tables are padded with out-of-range ids, so a padding key that leaked
    into a result would show; a sequence without a query row in the step is skipped."""
    monkeypatch.setattr(importlib.import_module("tachyon.kernels.attention"), "_REF_DECODE_KEYS", decode_keys)
    gen = torch.Generator().manual_seed(2)
    q, cache, meta, dense = make_batch(DECODE, Hq, Hkv, D, block_size, torch.float32, gen)
    owned = torch.zeros(cache.shape[1] * block_size, dtype=torch.bool)
    tables = meta["block_tables"].cpu()
    for b, (c, n) in enumerate(DECODE):
        ids = tables[b, : -(-(c + n) // block_size)].long()
        slots = (ids[:, None] * block_size + torch.arange(block_size)).flatten()[: c + n]
        owned[slots] = True
    cache = cache.cpu()
    cache[:, ~owned.view(-1, block_size)] = float("nan")
    for b, (c, n) in enumerate(DECODE):
        tables[b, -(-(c + n) // block_size):] = 10_000
    meta["block_tables"] = tables.to(DEV)
    out = K.attention_ref(q, cache.to(DEV), **meta)
    ref = sdpa_oracle(q, dense, DECODE, Hq, Hkv)
    torch.testing.assert_close(out.double().cpu(), ref, rtol=1e-5, atol=1e-5)
    # sequence 2 has no query row this step: the rows of the others are unchanged and nothing else is written
    qsl = meta["query_start_loc"].cpu().tolist()
    skip = dict(meta, query_start_loc=torch.tensor(qsl[:3] + [v - 1 for v in qsl[3:]], dtype=torch.int32).to(DEV))
    q_skip = torch.cat([q[:2], q[3:]])
    part = K.attention_ref(q_skip, cache.to(DEV), **skip, out=torch.full_like(q_skip, float("nan")))
    torch.testing.assert_close(part.double().cpu(), torch.cat([ref[:2], ref[3:]]), rtol=1e-5, atol=1e-5)

@needs_triton
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("Hq,Hkv,D,splits", [(8, 2, 64, 1), (8, 2, 64, 3), (7, 1, 32, 0), (4, 4, 48, 2)])
def test_attention_decode(poison, dtype, Hq, Hkv, D, splits):
    gen = torch.Generator().manual_seed(1)
    q, cache, meta, _ = make_batch(DECODE, Hq, Hkv, D, 16, dtype, gen)
    out = K.attention_triton(q, cache, **meta, out=torch.full_like(q, NAN), num_kv_splits=splits)
    close(out, K.attention_ref(q, cache, **meta), dtype)


# seq_lens 1, 21, 151, 96, 261: with 8 splits of >= 32 keys (fp32 BLOCK_N) they use 1, 1, 5, 3, 5
# splits, leaving some empty
SPLIT_DECODE = [(0, 1), (20, 1), (150, 1), (95, 1), (260, 1)]


@needs_triton
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("G", [1, 2, 4, 7])
@pytest.mark.parametrize("early_tile", ["0", "1"])
def test_attention_decode_kv_splits(poison, monkeypatch, dtype, G, early_tile):
    """Split-KV decode over sequences of different lengths, GQA groups 1/2/4/7, with each split's first tile
    loaded before the PDL wait (the step's own key S - 1 after it) or not; the merge runs in a fixed order,
    so a second call is bit-identical."""
    monkeypatch.setenv("TACHYON_DECODE_EARLY_TILE", early_tile)
    Hkv, D = 2, 32
    gen = torch.Generator().manual_seed(3)
    q, cache, meta, _ = make_batch(SPLIT_DECODE, G * Hkv, Hkv, D, 16, dtype, gen)
    ref = K.attention_ref(q, cache, **meta)
    first = K.attention_triton(q, cache, **meta, out=torch.full_like(q, NAN), num_kv_splits=8)
    close(first, ref, dtype)
    second = K.attention_triton(q, cache, **meta, out=torch.full_like(q, NAN), num_kv_splits=8)
    assert torch.equal(first, second)


@needs_triton
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("splits", [1, 8])
def test_attention_decode_order(poison, dtype, splits):
    """decode_order (a permutation of the sequences) only reorders the decode programs: every row is the
    batch-order launch's, bit for bit, split or not."""
    Hkv, D = 2, 32
    gen = torch.Generator().manual_seed(4)
    q, cache, meta, _ = make_batch(SPLIT_DECODE, 4 * Hkv, Hkv, D, 16, dtype, gen)
    base = K.attention_triton(q, cache, **meta, out=torch.full_like(q, NAN), num_kv_splits=splits)
    lens = meta["seq_lens"]
    for order in (torch.argsort(-lens, stable=True), torch.tensor([3, 0, 4, 2, 1])):
        out = K.attention_triton(q, cache, **meta, out=torch.full_like(q, NAN), num_kv_splits=splits,
                                 decode_order=order.to(torch.int32).to(lens.device))
        assert torch.equal(out, base), order.tolist()
    close(base, K.attention_ref(q, cache, **meta), dtype)


@needs_triton
@pytest.mark.parametrize("merge", MERGE_MODES)
@pytest.mark.parametrize("early_tile", ["0", "1"])
def test_attention_decode_kv_splits_graph_shape(poison, monkeypatch, merge, early_tile):
    """As a CUDA graph launches it: max_seq_len = max_model_len picks many splits, short contexts use
    only their first few (128-key, or 32 in fp32) splits; results match the exact-max_seq_len call. With
    the early exit (and the inline merge) the empty splits write nothing (their NaN-poisoned partials
    must not be merged); the inline merge leaves its counters zero."""
    set_merge_mode(monkeypatch, merge)
    monkeypatch.setenv("TACHYON_DECODE_EARLY_TILE", early_tile)
    dtype = DTYPES[-1]
    gen = torch.Generator().manual_seed(4)
    q, cache, meta, _ = make_batch(SPLIT_DECODE, 14, 2, 32, 16, dtype, gen)
    ref = K.attention_ref(q, cache, **meta)
    wide = dict(meta, max_seq_len=4096)
    assert split_mod.choose_kv_splits(len(SPLIT_DECODE), 2, 4096, split_mod.sm_count(q.device)) > 8
    out = K.attention_triton(q, cache, **wide, out=torch.full_like(q, NAN))
    close(out, ref, dtype)
    close(K.attention_triton(q, cache, **meta, out=torch.full_like(q, NAN)), out, dtype)
    assert_counters_zero()


@needs_triton
@pytest.mark.parametrize("tile", ["16:2:1", "64:4:2"])
def test_attention_decode_tile_knob(poison, monkeypatch, tile):
    """TACHYON_DECODE_TILE changes the decode kernel's key tile (and so its split lengths; splits of several
    tiles here), not the result; a malformed value names the knob."""
    monkeypatch.setenv("TACHYON_DECODE_TILE", tile)
    monkeypatch.setenv("TACHYON_DECODE_EARLY_TILE", "1")
    dtype = DTYPES[-1]
    gen = torch.Generator().manual_seed(6)
    q, cache, meta, _ = make_batch(SPLIT_DECODE, 8, 2, 32, 16, dtype, gen)
    out = K.attention_triton(q, cache, **dict(meta, max_seq_len=4096), out=torch.full_like(q, NAN))
    close(out, K.attention_ref(q, cache, **meta), dtype)
    monkeypatch.setenv("TACHYON_DECODE_TILE", "64")
    with pytest.raises(ValueError, match="TACHYON_DECODE_TILE"):
        K.attention_triton(q, cache, **meta)


@needs_triton
@pytest.mark.parametrize("tile", ["16:2:1", "64:4:2"])
def test_attention_decode_unsplit_tile_knob(poison, monkeypatch, tile):
    """TACHYON_DECODE_UNSPLIT_TILE changes the unsplit decode launch's key tile (contexts of several tiles, one
    ending inside a tile), not the result; TACHYON_DECODE_TILE leaves that launch alone; a malformed value names
    the knob."""
    monkeypatch.setenv("TACHYON_DECODE_UNSPLIT_TILE", tile)
    monkeypatch.setenv("TACHYON_DECODE_TILE", "bad")
    dtype = DTYPES[-1]
    gen = torch.Generator().manual_seed(8)
    q, cache, meta, _ = make_batch(DECODE, 8, 2, 32, 16, dtype, gen)
    out = K.attention_triton(q, cache, **meta, out=torch.full_like(q, NAN), num_kv_splits=1)
    close(out, K.attention_ref(q, cache, **meta), dtype)
    monkeypatch.setenv("TACHYON_DECODE_UNSPLIT_TILE", "64:4")
    with pytest.raises(ValueError, match="TACHYON_DECODE_UNSPLIT_TILE"):
        K.attention_triton(q, cache, **meta, num_kv_splits=1)


@needs_triton
@pytest.mark.parametrize("tile,align", [("32:4:1", "8"), ("32:4:1", "48"), ("16:2:1", "16")])
@pytest.mark.parametrize("early_tile", ["0", "1"])
def test_attention_decode_split_align_knob(poison, monkeypatch, tile, align, early_tile):
    """TACHYON_DECODE_SPLIT_ALIGN sets the split-length granularity apart from the key tile: splits ending
    inside a tile (align 8 or 48 with 32-key tiles) mask the keys past their end, every key is attended
    exactly once, with the early exit and the merge kernel reading only the splits that hold keys; a
    malformed value names the knob."""
    monkeypatch.setenv("TACHYON_DECODE_TILE", tile)
    monkeypatch.setenv("TACHYON_DECODE_SPLIT_ALIGN", align)
    monkeypatch.setenv("TACHYON_DECODE_EARLY_TILE", early_tile)
    dtype = DTYPES[-1]
    gen = torch.Generator().manual_seed(7)
    q, cache, meta, _ = make_batch(SPLIT_DECODE, 8, 2, 32, 16, dtype, gen)
    ref = K.attention_ref(q, cache, **meta)
    for m in (meta, dict(meta, max_seq_len=4096)):
        close(K.attention_triton(q, cache, **m, out=torch.full_like(q, NAN)), ref, dtype)
    monkeypatch.setenv("TACHYON_DECODE_SPLIT_ALIGN", "0")
    with pytest.raises(ValueError, match="TACHYON_DECODE_SPLIT_ALIGN"):
        K.attention_triton(q, cache, **meta)


@needs_triton
@pytest.mark.parametrize("dtype", DTYPES)
# D=48: the prefill kernel pads its head tile to 64, so its unmasked tiles keep the head-dim mask (EVEN_D=False)
@pytest.mark.parametrize("Hq,Hkv,D,block_size", [(4, 2, 64, 16), (6, 3, 32, 8), (14, 2, 32, 16), (6, 2, 48, 8)])
def test_attention_prefill_mixed(poison, dtype, Hq, Hkv, D, block_size):
    gen = torch.Generator().manual_seed(2)
    specs = MIXED + [(3, 40)]
    q, cache, meta, _ = make_batch(specs, Hq, Hkv, D, block_size, dtype, gen)
    out = K.attention_triton(q, cache, **meta)
    close(out, K.attention_ref(q, cache, **meta), dtype)


PREFILL_TILES = sorted({"{BLOCK_M}:{BLOCK_N}:{num_warps}:{num_stages}".format(**c)
                        for c in [*(c for _, c in attn_cfg.PREFILL_CONFIGS_BF16), attn_cfg.PREFILL_CONFIG_BF16_WIDE]})


@needs_triton
@pytest.mark.parametrize("tile", PREFILL_TILES)
def test_attention_prefill_table_configs(poison, monkeypatch, tile):
    """Every config of the bf16 prefill table, forced through TACHYON_PREFILL_TILE (so the CPU interpreter runs
    each one, in fp32), gives the reference's result on a mixed batch with cached prefixes; a malformed value
    names the knob."""
    monkeypatch.setenv("TACHYON_PREFILL_TILE", tile)
    dtype = DTYPES[-1]
    gen = torch.Generator().manual_seed(8)
    q, cache, meta, _ = make_batch(MIXED + [(3, 40)], 8, 4, 32, 16, dtype, gen)
    out = K.attention_triton(q, cache, **meta, out=torch.full_like(q, NAN))
    close(out, K.attention_ref(q, cache, **meta), dtype)
    monkeypatch.setenv("TACHYON_PREFILL_TILE", "64:64:4")
    with pytest.raises(ValueError, match="TACHYON_PREFILL_TILE"):
        K.attention_triton(q, cache, **meta)


def test_prefill_config_by_query_length(monkeypatch):
    """bf16 picks its tile by the step's longest query (small query tiles for short prompts) and, past 1,024
    tokens, by the packed group (the wide tile for groups of >= 4 heads); fp32 has one."""
    monkeypatch.delenv("TACHYON_PREFILL_TILE", raising=False)
    pick = attn_cfg.prefill_config
    lens = (1, 32, 33, 64, 65, 256, 257, 1024, 1025, 100_000)
    assert [pick("bf16", n, 2)["BLOCK_M"] for n in lens] == [16, 16, 16, 16, 32, 32, 64, 64, 64, 64]
    assert [pick("bf16", n, 8)["BLOCK_M"] for n in lens] == [16, 16, 16, 16, 32, 32, 64, 64, 128, 128]
    assert [pick("bf16", n, 4)["num_warps"] for n in (1024, 1025)] == [4, 8]
    assert [pick("bf16", n)["BLOCK_N"] for n in (32, 33, 1024, 1025)] == [32, 64, 64, 64]
    assert pick("fp32", 8) == pick("fp32", 4096, 8) == attn_cfg.PREFILL_CONFIG_FP32


def test_decode_early_exit_policy(monkeypatch):
    """Default: the dedicated decode kernel exits empty splits early, the fused one does not; the knob
    forces either way for both."""
    monkeypatch.delenv("TACHYON_DECODE_EARLY_EXIT", raising=False)
    assert split_mod.decode_early_exit(fused=False) and not split_mod.decode_early_exit(fused=True)
    for val, want in (("1", True), ("0", False)):
        monkeypatch.setenv("TACHYON_DECODE_EARLY_EXIT", val)
        assert split_mod.decode_early_exit(fused=False) is want and split_mod.decode_early_exit(fused=True) is want


def test_decode_inline_merge_policy(monkeypatch):
    """Default: the fused decode kernel merges its splits inline, the dedicated one launches the merge
    kernel; the knob forces either way for both."""
    monkeypatch.delenv("TACHYON_DECODE_MERGE", raising=False)
    assert split_mod.decode_inline_merge(fused=True) and not split_mod.decode_inline_merge(fused=False)
    for val, want in (("inline", True), ("kernel", False)):
        monkeypatch.setenv("TACHYON_DECODE_MERGE", val)
        assert split_mod.decode_inline_merge(fused=False) is want and split_mod.decode_inline_merge(fused=True) is want


def test_choose_kv_splits(monkeypatch):
    monkeypatch.delenv("TACHYON_DECODE_SPLIT_WAVES", raising=False)
    assert split_mod.choose_kv_splits(256, 4, 4096, 132) == 1
    assert split_mod.choose_kv_splits(33, 4, 4096, 132) == 1  # 132 programs fill the GPU
    assert split_mod.choose_kv_splits(1, 4, 256, 132) == 1  # two splits' worth of keys: not worth a merge
    assert split_mod.choose_kv_splits(1, 4, 300, 132) == 3  # >= 128 keys per split
    assert 8 <= split_mod.choose_kv_splits(1, 4, 4096, 132) <= 64
    assert split_mod.choose_kv_splits(1, 4, 32768, 132) == 64  # the cap
    assert split_mod.choose_kv_splits(1, 8, 32768, 132) == 33  # ~2 programs per SM


def test_decode_split_waves_knob(monkeypatch):
    """TACHYON_DECODE_SPLIT_WAVES=W splits launches of fewer than W x SMs programs into W x SMs of them."""
    monkeypatch.setenv("TACHYON_DECODE_SPLIT_WAVES", "4")
    assert split_mod.choose_kv_splits(48, 4, 4096, 132) == 3  # 192 programs -> 576 >= 528
    assert split_mod.choose_kv_splits(132, 4, 4096, 132) == 1  # 528 programs: four waves already
    assert split_mod.choose_kv_splits(48, 4, 4096, 132, waves=1.0) == 1  # the argument over the knob
    for bad in ("0", "-1", "x"):
        monkeypatch.setenv("TACHYON_DECODE_SPLIT_WAVES", bad)
        with pytest.raises(ValueError, match="TACHYON_DECODE_SPLIT_WAVES must be a positive number of waves"):
            split_mod.choose_kv_splits(48, 4, 4096, 132)


@needs_triton
@pytest.mark.parametrize("pack,contig", [(True, False), (True, True), (False, False), (False, True)])
def test_prefill_attention_variants_benchmark_kernel(pack, contig):
    """benchmarks/gpu/prefill_attn_variants.py's experimental prefill kernel (packed GQA rows or one head per
    program; K/V paged or contiguous) against the reference, so the forms it times compute attention."""
    variants = importlib.import_module("benchmarks.gpu.prefill_attn_variants")
    torch.manual_seed(0)
    dtype = DTYPES[-1]  # bf16 on a GPU; fp32 under the interpreter
    for hq, hkv in ((28, 4), (16, 8)):
        c = variants.case(hq, hkv, [37, 70], torch.device(DEV), dtype)
        ref = K.attention_ref(c["q"], c["cache"], c["qsl"], c["seq_lens"], c["table"], 70, 70, variants.D ** -0.5)
        out = torch.full_like(c["q"], NAN)
        variants.v2_fn(c, out, 64, 32, 4, 2, pack, contig)()
        close(out, ref, dtype)


@needs_triton
@pytest.mark.parametrize("num_sms, splits, allowed", [(5, 1, False), (4, 1, True), (5, 3, True)])
def test_attention_decode_asks_pdl_by_the_one_wave_rule(monkeypatch, num_sms, splits, allowed):
    """The decode launch passes attention_config.attention_pdl's answer to pdl_args: an unsplit launch of (5
    sequences x 2 KV heads =) 10 programs is at most DECODE_NO_PDL_PROGRAMS_PER_SM (2) a SM on 5 SMs (PDL withheld)
    but not on 4 (kept); a split launch keeps it. The output stays the reference's either way."""
    attention_mod = importlib.import_module("tachyon.kernels.attention")
    asked = []
    real = attention_mod.pdl_args

    def recording(device, allowed=True):
        asked.append(allowed)
        return real(device, allowed)

    monkeypatch.delenv("TACHYON_ATTN_PDL", raising=False)
    monkeypatch.setattr(attention_mod, "pdl_args", recording)
    monkeypatch.setattr(attention_mod, "sm_count", lambda device: num_sms)
    gen = torch.Generator().manual_seed(5)
    q, cache, meta, _ = make_batch(DECODE, 4, 2, 32, 16, torch.float32, gen)
    out = K.attention_triton(q, cache, **meta, out=torch.full_like(q, NAN), num_kv_splits=splits)
    close(out, K.attention_ref(q, cache, **meta), torch.float32)
    assert asked[0] is allowed


@needs_triton
def test_attention_energy_stream_kernel():
    """benchmarks/gpu/attn_energy.py's KV-stream kernel (the decode kernel's gathered K / V loads and a sum) against
    its torch reference, so the joules it measures are for the same bytes, read through the same block tables."""
    energy = importlib.import_module("benchmarks.gpu.attn_energy")
    tiles = importlib.import_module("benchmarks.gpu.mixed_attn_tiles")
    gen = torch.Generator().manual_seed(3)
    lens = [5, 40, 17, 33]
    tables, nblk = tiles.shuffled_block_tables(lens, 16, gen)
    seq_lens = torch.tensor(lens, dtype=torch.int32)
    s = {"cache": torch.randn(2, nblk, 16, 2, 32, generator=gen).to(DTYPES[-1]).to(DEV),
         "tables": tables.to(DEV), "seq_lens": seq_lens.to(DEV),
         "order": torch.argsort(-seq_lens, stable=True).to(torch.int32).to(DEV)}
    out = torch.full((len(lens), 2, 32), NAN, device=DEV)
    energy.kv_stream(s, out, block_n=16)
    torch.testing.assert_close(out, energy.kv_stream_ref(s), rtol=1e-4, atol=1e-3)
