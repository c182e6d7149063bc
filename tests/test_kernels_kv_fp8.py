"""An FP8 (e4m3, scale 1) KV cache (kv_cache_dtype="fp8"): every kernel that writes the cache rounds and
saturates as quant_fp8.cast_to_cache_ref does (checked against a brute-force nearest-e4m3 oracle), and every
kernel that reads it gives the reference attention over the same cache. Triton runs under the interpreter on
CPU (fp32 queries there: its bf16 tl.dot is unusable)."""

import math

import pytest
import torch

from tachyon.kernels import attention_config as attn_cfg
from tachyon.kernels._triton import tl, triton
from tachyon.kernels.attention_config import KV8_WIDEN_MODES
from tachyon.kernels.quant_fp8 import widen_cache_tile
from tests.kernel_env import CUDA, DEV, NAN, K, close, needs_triton
from tests.test_kernels import DECODE, MIXED, SPLIT_DECODE, make_batch, sdpa_oracle
from tests.test_kernels_decode_fused import make_case, run

FP8 = torch.float8_e4m3fn
QDT = torch.bfloat16 if CUDA else torch.float32
pytestmark = pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")


def _nearest_e4m3(x: torch.Tensor) -> torch.Tensor:
    """Independent oracle: each value's nearest finite e4m3 value by search over all of them (ties: the even
    bit pattern), past +-448 the largest; bit patterns as uint8."""
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    vals = codes.view(FP8).float()
    keep = torch.isfinite(vals) & ~(codes == 0x80)  # one zero (+0); -0 kept apart below
    codes, vals = codes[keep], vals[keep]
    xf = x.float().clamp(-448, 448).flatten()
    dist = (xf[:, None] - vals[None, :]).abs()
    best = dist.min(1, keepdim=True).values
    tie = dist == best
    pick = torch.where(tie, (codes[None, :].int() & 1) == 0, False)
    idx = torch.where(pick.any(1), pick.int().argmax(1), tie.int().argmax(1))
    out = codes[idx]
    out = torch.where((out == 0) & torch.signbit(xf), torch.tensor(0x80, dtype=torch.uint8), out)  # -0 stays -0
    return out.view(x.shape)


def _fp8_cache(cache: torch.Tensor) -> torch.Tensor:
    return K.quant_fp8.cast_to_cache_ref(cache, FP8)


def test_cast_to_cache_ref_is_nearest_e4m3_saturating():
    x = torch.cat([torch.randn(500) * 4, torch.tensor([0.0, -0.0, 447.9, 448.0, 460.0, 1e4, -1e4, 2.0 ** -10,
                                                       -(2.0 ** -10), 0.0029296875, 17.0, 19.0])])
    got = K.quant_fp8.cast_to_cache_ref(x, FP8)
    assert torch.equal(got.view(torch.uint8), _nearest_e4m3(x))
    assert float(got.float().abs().max()) == 448.0  # saturated, not NaN
    assert torch.equal(K.quant_fp8.cast_to_cache_ref(x, torch.bfloat16), x.to(torch.bfloat16))


@pytest.mark.parametrize("impl", ["ref", pytest.param("triton", marks=needs_triton)])
def test_store_kv_fp8_cache(impl):
    """Stored slots hold the nearest e4m3 value (saturated past 448); skipped slots and the rest of the cache
    keep their bytes."""
    gen = torch.Generator().manual_seed(5)
    T, H, D, nb, bs = 9, 2, 24, 5, 4
    key = (torch.randn(T, H, D, generator=gen) * 50).to(DEV)
    value = (torch.randn(T, H, D, generator=gen) * 0.01).to(DEV)  # e4m3 subnormals
    key[0, 0, :4] = torch.tensor([1e3, -1e3, 448.0, 0.0])
    slots = torch.randperm(nb * bs, generator=gen)[:T].to(DEV)
    slots[3] = -1
    cache = torch.randn(2, nb, bs, H, D, generator=gen).to(FP8).to(DEV)
    before = cache.clone()
    (K.store_kv_ref if impl == "ref" else K.store_kv_triton)(key, value, cache, slots)
    raw, old = cache.view(torch.uint8).cpu(), before.view(torch.uint8).cpu()
    written = torch.zeros(nb * bs, dtype=torch.bool)
    for t in range(T):
        s = int(slots[t])
        if s < 0:
            continue
        written[s] = True
        assert torch.equal(raw[0, s // bs, s % bs], _nearest_e4m3(key[t].cpu()))
        assert torch.equal(raw[1, s // bs, s % bs], _nearest_e4m3(value[t].cpu()))
    keep = ~written.view(nb, bs)
    assert torch.equal(raw[:, keep], old[:, keep])


@triton.jit
def _widen_kernel(x_ptr, o_ptr, WIDEN: tl.constexpr):
    i = tl.arange(0, 256)
    tl.store(o_ptr + i, widen_cache_tile(tl.load(x_ptr + i), tl.float32, WIDEN))


# TACHYON_KV8_WIDEN's modes: asm is PTX, which only compiled code runs (under the interpreter it means bits)
_PTX = pytest.mark.skipif(not CUDA, reason="PTX: CUDA only")
WIDEN_MODES = ["cvt", "bits", "cvt:bits", "bits:cvt"]
WIDEN_MODES += [pytest.param(m, marks=_PTX) for m in ("asm", "cvt:asm", "asm:cvt")]


@needs_triton
@pytest.mark.parametrize("mode", WIDEN_MODES[:2] + WIDEN_MODES[4:5])
def test_widen_cache_tile_every_e4m3_value(mode):
    """Every finite e4m3 value (subnormals, both zeros, +-448) widened by quant_fp8.widen_cache_tile: the cast
    gives the value, the bit placements the value / 256, exactly."""
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    vals = codes.view(FP8).float()
    out = torch.full((256,), NAN, device=DEV)
    _widen_kernel[(1,)](codes.view(FP8).to(DEV), out, WIDEN=KV8_WIDEN_MODES[mode])
    finite = torch.isfinite(vals)
    want = vals if mode == "cvt" else vals / 256
    assert torch.equal(out.cpu()[finite], want[finite])
    assert torch.equal(torch.signbit(out.cpu()[finite]), torch.signbit(vals[finite]))  # -0 stays -0


@needs_triton
@pytest.mark.parametrize("mode", WIDEN_MODES + ["default", "default-large", "auto-large"])
@pytest.mark.parametrize("splits", [1, 3])
def test_attention_decode_fp8_cache(poison, monkeypatch, splits, mode):
    """The decode kernel over an e4m3 cache, each way of widening it (forced, or by size by default or under auto:
    "-large" lowers the program threshold so this small batch takes the large launches' widening), gives the
    reference's result over the same cache, and the float64 SDPA over the dequantized keys and values."""
    if mode.startswith(("default", "auto")):
        monkeypatch.delenv("TACHYON_KV8_WIDEN", raising=False)
        if mode.startswith("auto"):
            monkeypatch.setenv("TACHYON_KV8_WIDEN", "auto")
        if mode.endswith("-large"):
            monkeypatch.setattr(attn_cfg, "KV8_SPLIT_WIDEN_MIN_PROGRAMS_PER_SM", 0)
    else:
        monkeypatch.setenv("TACHYON_KV8_WIDEN", mode)
    gen = torch.Generator().manual_seed(11)
    q, cache, meta, _ = make_batch(DECODE, 8, 2, 64, 16, torch.float32, gen)
    cache8 = _fp8_cache(cache)
    q = q.to(QDT)
    out = K.attention_triton(q, cache8, **meta, out=torch.full_like(q, NAN), num_kv_splits=splits)
    ref = K.attention_ref(q, cache8, **meta)
    close(out, ref, QDT)
    dense = _dense(cache8, meta, DECODE)
    t = 2e-2 if QDT == torch.bfloat16 else 1e-5
    torch.testing.assert_close(ref.double().cpu(), sdpa_oracle(q.float().cpu(), dense, DECODE, 8, 2), rtol=t, atol=t)


@needs_triton
@pytest.mark.parametrize("mode", WIDEN_MODES)
@pytest.mark.parametrize("early_tile", ["0", "1"])
def test_attention_decode_fp8_cache_splits_early_tile(poison, monkeypatch, early_tile, mode):
    monkeypatch.setenv("TACHYON_DECODE_EARLY_TILE", early_tile)
    monkeypatch.setenv("TACHYON_KV8_WIDEN", mode)
    gen = torch.Generator().manual_seed(12)
    q, cache, meta, _ = make_batch(SPLIT_DECODE, 8, 2, 32, 16, torch.float32, gen)
    cache8, q = _fp8_cache(cache), q.to(QDT)
    out = K.attention_triton(q, cache8, **meta, out=torch.full_like(q, NAN), num_kv_splits=8)
    close(out, K.attention_ref(q, cache8, **meta), QDT)


@needs_triton
@pytest.mark.parametrize("mode", WIDEN_MODES + ["default-large"])
def test_mixed_attention_fp8_cache(poison, monkeypatch, mode):
    """The one-launch mixed attention over an e4m3 cache (its decode programs widened each way) gives the
    reference's covered rows. By default it converts both tiles (cvt) whatever its size: "default-large" drops the
    program threshold, and the launch must still take WIDEN 0."""
    import math

    from tachyon.kernels import attention_mixed
    from tests.test_kernels_mixed import STEPS, mixed_step

    widens = []
    if mode == "default-large":
        monkeypatch.delenv("TACHYON_KV8_WIDEN", raising=False)
        monkeypatch.setattr(attn_cfg, "KV8_SPLIT_WIDEN_MIN_PROGRAMS_PER_SM", 0)
        monkeypatch.setattr(attention_mixed, "kv8_widen",
                            lambda *a: widens.append(attn_cfg.kv8_widen(*a)) or widens[-1])
    else:
        monkeypatch.setenv("TACHYON_KV8_WIDEN", mode)
    gen = torch.Generator().manual_seed(14)
    q, cache, parts, bound, max_seq, _, covered = mixed_step(*STEPS[0], 8, 2, 32, 8, torch.float32, gen)
    cache8, q = _fp8_cache(cache), q.to(QDT)
    args = dict(max_chunk_len=bound, max_seq_len=max_seq, scale=1.0 / math.sqrt(32))
    out = K.mixed_attention_triton(q, cache8, **parts, **args, out=torch.full_like(q, NAN))
    ref = K.mixed_attention_ref(q, cache8, **parts, **args, out=torch.full_like(q, NAN))
    rows = torch.tensor(covered, device=q.device)
    close(out[rows], ref[rows], QDT)
    assert widens == ([0] if mode == "default-large" else [])


@needs_triton
def test_attention_prefill_fp8_cache(poison):
    gen = torch.Generator().manual_seed(13)
    specs = MIXED + [(3, 40)]
    q, cache, meta, _ = make_batch(specs, 6, 3, 32, 8, torch.float32, gen)
    cache8, q = _fp8_cache(cache), q.to(QDT)
    out = K.attention_triton(q, cache8, **meta, out=torch.full_like(q, NAN))
    close(out, K.attention_ref(q, cache8, **meta), QDT)


def test_kv8_widen_knob(monkeypatch):
    """An e4m3 cache's widening of K and V tiles (k + 3 v): by default (or TACHYON_KV8_WIDEN=auto) cvt, or cvt:asm
    from the threshold's program count; other values force it (asm becomes bits under the CPU's interpreter). Other
    caches: 0. A malformed value names the variable."""
    widen = attn_cfg.kv8_widen
    cpu, meta, fp8 = torch.device("cpu"), torch.device("meta"), torch.float8_e4m3fn
    monkeypatch.delenv("TACHYON_KV8_WIDEN", raising=False)
    least = math.ceil(attn_cfg.KV8_SPLIT_WIDEN_MIN_PROGRAMS_PER_SM * 132)  # sm_count off CUDA
    for rule in ("", "auto"):
        monkeypatch.setenv("TACHYON_KV8_WIDEN", rule)
        assert widen(fp8, meta) == widen(fp8, meta, least - 1) == 0  # cvt for both below the threshold
        assert widen(fp8, meta, least) == 6 and widen(fp8, cpu, least) == 3  # then cvt:asm (cvt:bits on CPU)
        assert widen(torch.bfloat16, meta, least) == 0
    for mode, want, want_cpu in (("cvt", 0, 0), ("bits", 4, 4), ("asm", 8, 4), ("cvt:asm", 6, 3), ("asm:bits", 5, 4)):
        monkeypatch.setenv("TACHYON_KV8_WIDEN", mode)
        assert widen(fp8, meta) == widen(fp8, meta, 10**6) == want and widen(fp8, cpu) == want_cpu
        assert widen(torch.bfloat16, cpu) == 0
    for bad in ("fast", "cvt:", "cvt:asm:bits", "auto:cvt"):
        monkeypatch.setenv("TACHYON_KV8_WIDEN", bad)
        with pytest.raises(ValueError, match="TACHYON_KV8_WIDEN"):
            widen(torch.bfloat16, cpu)


@needs_triton
def test_fp8_mma_decode_probe(poison):
    """benchmarks/gpu/attn_fp8_mma_probe.py's decode kernel (e4m3 operands for the dots; 7 query heads a KV head
    padded to 64 rows) against the reference attention over the same e4m3 cache: every row of every head written,
    close at e4m3's precision, and several times closer with the queries' and probabilities' residual dots."""
    import importlib

    probe = importlib.import_module("benchmarks.gpu.attn_fp8_mma_probe")
    gen = torch.Generator().manual_seed(4)
    q, cache, meta, _ = make_batch(DECODE, 14, 2, 32, 16, torch.float32, gen)
    cache8 = _fp8_cache(cache)
    ref = K.attention_ref(q, cache8, **meta)
    err = {}
    for variant in ("qk8x2_pv8x2", "qk8_pv8", "qk8x2_pv16"):
        out = probe.decode_fp8_mma(q, cache8, meta["seq_lens"], meta["block_tables"], meta["scale"],
                                   out=torch.full_like(q, NAN), block_n=32, **probe.VARIANTS[variant])
        assert not torch.isnan(out).any(), variant
        err[variant] = ((out - ref).norm() / ref.norm()).item()
    # e4m3 operands alone: ~1.5e-2 on the CPU; with the residual dots ~3e-4 there (the interpreter's dots are exact
    # fp32). Hopper's FP8 warpgroup MMA accumulates less exactly (quant_fp8.FP8_SMALL_FAST_CONFIGS: 1e-3 to 4e-3)
    bound = 2e-3 if DEV == "cpu" else 1e-2
    assert err["qk8_pv8"] < 0.05 and err["qk8x2_pv8x2"] < bound and err["qk8x2_pv16"] < bound, err
    assert err["qk8x2_pv8x2"] < err["qk8_pv8"] / 5, err


def _dense(cache8, meta, specs):
    """Per sequence, its K/V read back from the e4m3 cache through the block table (fp32)."""
    bs, out = cache8.shape[2], []
    for b, (c, n) in enumerate(specs):
        S = c + n
        blocks = meta["block_tables"][b, : -(-S // bs)].long()
        k = cache8[0, blocks].float().reshape(-1, *cache8.shape[3:])[:S].cpu()
        v = cache8[1, blocks].float().reshape(-1, *cache8.shape[3:])[:S].cpu()
        out.append((k, v))
    return out


@needs_triton
@pytest.mark.parametrize("name", ["qwen2", "qwen3"])
def test_qkv_post_fp8_cache_stores_the_reference_bytes(name):
    """The fused norm + rotary + store writes, bit for bit, what the reference sequence stores in the e4m3 cache
    (its q output as in the bf16 tests)."""
    case = make_case(name, torch.float32)
    case["kv_cache"] = _fp8_cache(torch.nan_to_num(case["kv_cache"], nan=3.0))
    args = {k: case[k] for k in ("qkv", "cos_sin_cache", "slot_mapping", "q_norm_weight", "k_norm_weight", "eps",
                                 "num_heads", "num_kv_heads", "head_dim")}
    positions = (case["seq_lens"] - 1).to(torch.int64)
    c_ref, c_tri = case["kv_cache"].clone(), case["kv_cache"].clone()
    q_ref = K.qkv_post_ref(positions=positions, kv_cache=c_ref, **args)
    q_tri = K.qkv_post_triton(positions=positions, kv_cache=c_tri, **args)
    close(q_tri, q_ref, torch.float32)
    assert torch.equal(c_tri.view(torch.uint8), c_ref.view(torch.uint8))


@needs_triton
@pytest.mark.parametrize("mode", WIDEN_MODES)
@pytest.mark.parametrize("early_tile", ["0", "1"])
@pytest.mark.parametrize("name", ["qwen2", "qwen3"])
def test_decode_qkv_attention_fp8_cache(poison, monkeypatch, name, early_tile, mode):
    """The fused decode kernel over an e4m3 cache (its cached tiles widened each way, the first loaded early or
    not): the new key stored as the reference stores it, the output as the reference's (whose attention reads the
    new key back from the cache, quantized)."""
    monkeypatch.setenv("TACHYON_DECODE_FUSED_EARLY_TILE", early_tile)
    monkeypatch.setenv("TACHYON_KV8_WIDEN", mode)
    case = make_case(name, QDT)
    case["kv_cache"] = _fp8_cache(case["kv_cache"].float())
    ref, ref_cache = run(K.decode_qkv_attention_ref, case, num_kv_splits=4)
    out, cache = run(K.decode_qkv_attention_triton, case, num_kv_splits=4)
    assert not torch.isnan(out[:-1].float()).any()
    close(out[:-1], ref[:-1], QDT)
    slots = case["slot_mapping"][:-1]
    flat, ref_flat = cache.flatten(1, 2).view(torch.uint8), ref_cache.flatten(1, 2).view(torch.uint8)
    assert torch.equal(flat[:, slots], ref_flat[:, slots])
