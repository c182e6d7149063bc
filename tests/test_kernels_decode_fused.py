"""decode_qkv_attention (qkv post-processing + decode attention in one kernel) against its reference
(qkv_post_ref then attention_ref), and the reference against a float64 SDPA oracle. Triton runs under
the interpreter on CPU."""

import math

import pytest
import torch

from tests.kernel_env import CUDA, DEV, MERGE_MODES, NAN, K, assert_counters_zero, close, needs_triton, set_merge_mode

pytestmark = pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # log(0) of empty splits

# name -> (Hq, Hkv, D, rot_dim, qk_norm), as test_kernels_fused.py
CONFIGS = {
    "llama": (4, 2, 32, 32, False),
    "qwen2": (7, 1, 32, 32, False),  # G = 7 (Qwen2.5-7B's ratio)
    "qwen3": (4, 2, 64, 64, True),  # per-head q/k RMSNorm
    "partial-rot": (3, 1, 48, 16, True),  # D not a power of two, rotary on 16 of 48 features
}
# seq_lens (the new token is the last key): a lone new key, keys within one page, page and BLOCK_N
# boundaries, and contexts long enough for several splits
SEQ_LENS = [1, 5, 16, 33, 129, 151, 260]
PAGE = 16


def make_case(name: str, dtype: torch.dtype, seq_lens=SEQ_LENS, seed: int = 0) -> dict:
    """A decode batch over a paged cache with shuffled blocks. The new keys' slots hold NaN, so a kernel
    that read a new key back instead of using its own copy would produce NaN. The last row is padding
    (slot -1): nothing of it may be stored and its output is unspecified."""
    Hq, Hkv, D, rot, qk_norm = CONFIGS[name]
    gen = torch.Generator().manual_seed(seed)
    B = len(seq_lens)
    nblk = [-(-s // PAGE) for s in seq_lens]
    num_blocks = sum(nblk) + 2
    perm = torch.randperm(num_blocks, generator=gen)
    tables = torch.zeros(B, max(nblk), dtype=torch.int32)
    slots = torch.empty(B, dtype=torch.int64)
    cache = torch.randn(2, num_blocks, PAGE, Hkv, D, generator=gen)
    used = 0
    for b, s in enumerate(seq_lens):
        ids = perm[used: used + nblk[b]]
        used += nblk[b]
        tables[b, : nblk[b]] = ids.to(torch.int32)
        slots[b] = ids[(s - 1) // PAGE] * PAGE + (s - 1) % PAGE
        cache[:, slots[b] // PAGE, slots[b] % PAGE] = NAN
    pad_slot = int(slots[-1])
    cache[:, pad_slot // PAGE, pad_slot % PAGE] = 1.0  # padding row: its slot keeps whatever it held
    slots[-1] = -1
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, rot, 2, dtype=torch.float32) / rot))
    weights = [(1 + 0.2 * torch.randn(D, generator=gen)).to(DEV, dtype) for _ in range(2)] if qk_norm else [None] * 2
    seq = torch.tensor(seq_lens, dtype=torch.int32)
    return dict(
        qkv=(2 * torch.randn(B, (Hq + 2 * Hkv) * D, generator=gen)).to(DEV, dtype),
        cos_sin_cache=K.rope_cos_sin_cache(inv_freq, 512).to(DEV),
        kv_cache=cache.to(DEV, dtype),
        slot_mapping=slots.to(DEV),
        q_norm_weight=weights[0],
        k_norm_weight=weights[1],
        eps=1e-6,
        num_heads=Hq,
        num_kv_heads=Hkv,
        head_dim=D,
        query_start_loc=torch.arange(B + 1, dtype=torch.int32).to(DEV),
        seq_lens=seq.to(DEV),
        block_tables=tables.to(DEV),
        max_seq_len=max(seq_lens),
        scale=1.0 / math.sqrt(D),
    )


def run(fn, case: dict, **kw) -> tuple[torch.Tensor, torch.Tensor]:
    """(out, cache after) of one call on a fresh copy of the cache."""
    args = dict(case, kv_cache=case["kv_cache"].clone(), **kw)
    return fn(**args), args["kv_cache"]


def sdpa_oracle(case: dict) -> torch.Tensor:
    """float64: q/k norm and rotary by hand from the config, the new K/V appended to the cached keys read
    through the block table, SDPA over all keys (the new query is the last position)."""
    Hq, Hkv, D = case["num_heads"], case["num_kv_heads"], case["head_dim"]
    qkv = case["qkv"].double().cpu()
    cs = case["cos_sin_cache"].double().cpu()
    half = cs.shape[1] // 2
    cache = case["kv_cache"].double().cpu()
    outs = []
    for b, S in enumerate(case["seq_lens"].tolist()):
        q = qkv[b, : Hq * D].view(Hq, D)
        k = qkv[b, Hq * D: (Hq + Hkv) * D].view(Hkv, D)
        v = qkv[b, (Hq + Hkv) * D:].view(Hkv, D)
        if case["q_norm_weight"] is not None:
            def norm(x, w):
                return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + case["eps"]) * w.double().cpu()
            q, k = norm(q, case["q_norm_weight"]), norm(k, case["k_norm_weight"])
        cos, sin = cs[S - 1, :half], cs[S - 1, half:]

        def rope(x, cos=cos, sin=sin):
            x = x.clone()
            x1, x2 = x[:, :half].clone(), x[:, half: 2 * half].clone()
            x[:, :half], x[:, half: 2 * half] = x1 * cos - x2 * sin, x2 * cos + x1 * sin
            return x
        q, k = rope(q), rope(k)
        blocks = case["block_tables"][b].long().cpu()
        keys = torch.arange(S - 1)
        slot = blocks[keys // PAGE] * PAGE + keys % PAGE
        kk = torch.cat([cache[0].reshape(-1, Hkv, D)[slot], k[None]])  # [S, Hkv, D]
        vv = torch.cat([cache[1].reshape(-1, Hkv, D)[slot], v[None]])
        G = Hq // Hkv
        kk, vv = kk.repeat_interleave(G, dim=1), vv.repeat_interleave(G, dim=1)
        att = torch.softmax(torch.einsum("hd,shd->hs", q, kk) * case["scale"], dim=-1)
        outs.append(torch.einsum("hs,shd->hd", att, vv))
    return torch.stack(outs)


def check_cache(cache: torch.Tensor, ref_cache: torch.Tensor, before: torch.Tensor, case: dict, atol: float):
    """Stored slots (no NaN left) match the reference; every other element, the padding row's slot
    included, is bit-identical to before the call."""
    slots = case["slot_mapping"][:-1]
    flat, ref_flat, old = (c.flatten(1, 2) for c in (cache, ref_cache, before))
    stored = torch.zeros(flat.shape[1], dtype=torch.bool, device=cache.device)
    stored[slots] = True
    assert torch.equal(flat[:, ~stored], old[:, ~stored]), "a slot outside slot_mapping changed"
    assert not torch.isnan(flat[:, stored]).any(), "unwritten K/V elements in a stored slot"
    torch.testing.assert_close(flat[:, stored].float(), ref_flat[:, stored].float(), rtol=atol, atol=atol)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_ref_matches_sdpa_oracle(name):
    case = make_case(name, torch.float32)
    out, _ = run(K.decode_qkv_attention_ref, case)
    torch.testing.assert_close(out[:-1].double().cpu(), sdpa_oracle(case)[:-1], rtol=1e-5, atol=1e-5)


@needs_triton
@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("splits", [1, 4, 0])
@pytest.mark.parametrize("merge", MERGE_MODES)
def test_triton_fp32(poison, monkeypatch, name, splits, merge):
    """fp32 against the reference: one split, 4 (each sequence cuts its own context; the new key lands in
    whichever split holds position S - 1) and the automatic count at a graph's max_seq_len; with each way
    of merging the splits (set_merge_mode: NaN-poisoned partials of splits that hold no keys must not be
    read; the inline merge's counters must be left zero)."""
    set_merge_mode(monkeypatch, merge)
    case = make_case(name, torch.float32)
    if splits == 0:
        case["max_seq_len"] = 4096
    ref, ref_cache = run(K.decode_qkv_attention_ref, case, num_kv_splits=splits)
    out, cache = run(K.decode_qkv_attention_triton, case, num_kv_splits=splits)
    assert out.shape == (len(SEQ_LENS), case["num_heads"], case["head_dim"])
    close(out[:-1], ref[:-1], torch.float32)
    check_cache(cache, ref_cache, case["kv_cache"], case, atol=1e-5)
    assert_counters_zero()


@needs_triton
@pytest.mark.parametrize("splits,merge", [(1, "kernel"), (4, "early"), (0, "kernel"), (0, "inline"),
                                          (0, "inline_wait")])
def test_triton_decode_order(poison, monkeypatch, splits, merge):
    """decode_order (a permutation of the sequences: longest first, or any) only reorders the programs: the
    output and the stored K/V are the batch-order launch's, bit for bit, with each way of merging the splits."""
    set_merge_mode(monkeypatch, merge)
    case = make_case("qwen3", torch.float32)
    if splits == 0:
        case["max_seq_len"] = 4096
    base, base_cache = run(K.decode_qkv_attention_triton, case, num_kv_splits=splits)
    lens = case["seq_lens"]
    perm = torch.randperm(len(lens), generator=torch.Generator().manual_seed(5))
    for order in (torch.argsort(-lens.cpu(), stable=True), perm):
        out, cache = run(K.decode_qkv_attention_triton, case, num_kv_splits=splits,
                         decode_order=order.to(torch.int32).to(lens.device))
        assert torch.equal(out[:-1], base[:-1]) and torch.equal(cache, base_cache), order.tolist()
    assert_counters_zero()


@needs_triton
@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("splits", [1, 4, 0])
def test_triton_early_tile(poison, monkeypatch, name, splits):
    """TACHYON_DECODE_FUSED_EARLY_TILE=1 (each split's first tile of cached keys loaded before the PDL wait)
    gives the reference's output and cache, whether the split holding the new key has cached keys or not."""
    monkeypatch.setenv("TACHYON_DECODE_FUSED_EARLY_TILE", "1")
    case = make_case(name, torch.float32)
    if splits == 0:
        case["max_seq_len"] = 4096
    ref, ref_cache = run(K.decode_qkv_attention_ref, case, num_kv_splits=splits)
    out, cache = run(K.decode_qkv_attention_triton, case, num_kv_splits=splits)
    close(out[:-1], ref[:-1], torch.float32)
    check_cache(cache, ref_cache, case["kv_cache"], case, atol=1e-5)
    assert_counters_zero()


@needs_triton
@pytest.mark.parametrize("tile", ["16:2:1", "64:4:2"])
@pytest.mark.parametrize("merge", ["kernel", "inline"])
@pytest.mark.parametrize("early_tile", ["0", "1"])
def test_triton_tile_knob(poison, monkeypatch, tile, merge, early_tile):
    """TACHYON_DECODE_FUSED_TILE changes the key tile of split launches (and so the split lengths and which
    split holds the new key), not the result; fp32, automatic split count at a graph's max_seq_len."""
    set_merge_mode(monkeypatch, merge)
    monkeypatch.setenv("TACHYON_DECODE_FUSED_TILE", tile)
    monkeypatch.setenv("TACHYON_DECODE_FUSED_EARLY_TILE", early_tile)
    case = dict(make_case("qwen3", torch.float32), max_seq_len=4096)
    ref, ref_cache = run(K.decode_qkv_attention_ref, case)
    out, cache = run(K.decode_qkv_attention_triton, case)
    close(out[:-1], ref[:-1], torch.float32)
    check_cache(cache, ref_cache, case["kv_cache"], case, atol=1e-5)
    assert_counters_zero()


@pytest.mark.skipif(not CUDA, reason="GPU only: the interpreter's bf16 tl.dot gives garbage (attention_triton's "
                    "decode kernel too, whose bf16 tests are GPU-only as well)")
@pytest.mark.parametrize("name", ["qwen2", "qwen3"])
@pytest.mark.parametrize("merge", MERGE_MODES)
@pytest.mark.parametrize("early_tile", ["0", "1"])
def test_triton_bf16(poison, monkeypatch, name, merge, early_tile):
    """bf16: against the reference within bf16 error, and deterministic (each way of merging splits, with and
    without the early tile)."""
    set_merge_mode(monkeypatch, merge)
    monkeypatch.setenv("TACHYON_DECODE_FUSED_EARLY_TILE", early_tile)
    case = make_case(name, torch.bfloat16)
    ref, ref_cache = run(K.decode_qkv_attention_ref, case, num_kv_splits=4)
    out, cache = run(K.decode_qkv_attention_triton, case, num_kv_splits=4)
    assert out.dtype == torch.bfloat16 and not torch.isnan(out[:-1]).any()
    bound = 1e-2
    err = ((out[:-1].double() - ref[:-1].double()).norm() / ref[:-1].double().norm()).item()
    assert err <= bound, err
    check_cache(cache, ref_cache, case["kv_cache"], case, atol=0.25)
    again, _ = run(K.decode_qkv_attention_triton, case, num_kv_splits=4)
    assert torch.equal(again[:-1], out[:-1])
    assert_counters_zero()


def test_rejects_non_decode_batch():
    case = make_case("llama", torch.float32)
    bad = dict(case, query_start_loc=case["query_start_loc"][:-1])
    with pytest.raises(ValueError, match="one token per sequence"):
        K.decode_qkv_attention_ref(**bad)


def test_model_policy(monkeypatch):
    """The model takes the fused kernel for decode batches of >= 2 sequences whose context is split (small
    batches), not at batch 1 nor when every (sequence, KV head) program already covers the GPU; the
    environment overrides the minimum batch (0: never)."""
    from tachyon.models.llama import fused_decode_attention

    monkeypatch.delenv("TACHYON_FUSED_DECODE_ATTN", raising=False)
    cpu = torch.device("cpu")  # sm_count: 132, as an H100 / H200
    assert not fused_decode_attention(1, 4, 4096, cpu)
    assert fused_decode_attention(8, 4, 4096, cpu)
    assert not fused_decode_attention(256, 4, 4096, cpu)  # 1,024 programs: no split
    assert not fused_decode_attention(8, 4, 200, cpu)  # a context too short to split
    monkeypatch.setenv("TACHYON_FUSED_DECODE_ATTN", "1")
    assert fused_decode_attention(1, 4, 4096, cpu)
    monkeypatch.setenv("TACHYON_FUSED_DECODE_ATTN", "0")
    assert not fused_decode_attention(8, 4, 4096, cpu)
