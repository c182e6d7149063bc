"""Launch configurations of the attention kernels (attention.py, decode_fused.py) and the environment knobs
that override them for A/B runs. Every knob is read per launch, so a CUDA graph keeps what was in force at
its capture. The tables' figures are H200 measurements; each names its evidence.
"""

import os

import torch

from tachyon.kernels._triton import sm_count

# Decode launch configurations; bf16 ones are the best of benchmarks/kernels/run_all.py's sweep on an H200
# (docs/kernels.md): decode 64 x ctx 4096 141 us vs 164 us with BLOCK_N=64. Prefill: PREFILL_CONFIGS_BF16 below.
DECODE_CONFIG = {
    "bf16": dict(BLOCK_N=128, num_warps=4, num_stages=2),
    "fp32": dict(BLOCK_N=32, num_warps=4, num_stages=1),
}
# bf16 launches of the dedicated decode kernel whose context is split (in the engine: batch 1): 64-key tiles,
# so a short context spreads over twice the programs (a split's latency is that of its first tiles).
# Decode-step replays on the H200 (benchmarks/results/decode_fused_session7/), against 128: Qwen2.5-7B bs1
# 3.819 -> 3.790 ms at a 512-token context, 3.931 -> 3.876 at 4,096 (graphs sized for 32,768); Qwen3-0.6B bs1
# 0.807 -> 0.788. 32- and 16-key tiles were no better on 7B (16 won on 0.6B bs1 at 512 tokens, 0.764, and
# lost on 7B at 4,096). The fused kernel (B >= 2, fewer and longer splits) keeps 128: with 64, B=8 gained
# 0.012 ms at 512 tokens but lost 0.050 at 4,096.
SPLIT_DECODE_CONFIG = dict(BLOCK_N=64, num_warps=4, num_stages=2)
# Prefill/extend launches by the step's longest query (max_query_len, which a prefill graph sets to its token
# bucket): a short prompt gets small query tiles, so its few tokens still spread over many programs. bf16 table
# from benchmarks/gpu/prefill_attn_sweep.py on an H200 (one sequence, no cached prefix, in-graph time per call,
# Qwen3-0.6B / Qwen2.5-7B head layouts); the old single config (128, 32, 4, 3) took 11.1 / 10.8 us at 128
# tokens against 5.9 / 7.2 here, 30.4 / 33.1 against 19.9 / 20.3 at 512, and 414.5 / 554.3 against
# 362.9 / 553.5 at 4,096 (results in benchmarks/results/prefill_session10/). Rows above 256 re-tuned for the
# unmasked-interior kernel of stop 35 (benchmarks/gpu/prefill_attn_variants.py, benchmarks/results/session28/,
# the engine kernel's own rows): 64:64 x 4 warps to 1,024 tokens; beyond, 128:64 x 8 warps where a KV head packs
# >= 4 query heads (Qwen2.5-7B, G=7: 1 x 16,384 5,629 us against 6,213 with 64:64, 1 x 2,048 99.9 against 107.3)
# and 64:64 where it packs fewer (Qwen3-0.6B, G=2: 1 x 2,048 71.3 against 87.0 with 128:64, 1 x 4,096 242.4
# against 293.8). A 128-row tile holds 128 / BLOCK_G tokens: few when G is large, so the wide tile pays there.
PREFILL_CONFIGS_BF16: tuple[tuple[int, dict], ...] = (
    (32, dict(BLOCK_M=16, BLOCK_N=32, num_warps=4, num_stages=2)),
    (64, dict(BLOCK_M=16, BLOCK_N=64, num_warps=4, num_stages=2)),
    (256, dict(BLOCK_M=32, BLOCK_N=64, num_warps=4, num_stages=2)),
    (1 << 62, dict(BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=2)),
)
PREFILL_WIDE_MIN_QUERY = 1025  # from this longest query, packed groups >= PREFILL_WIDE_MIN_GROUP take the wide tile
PREFILL_WIDE_MIN_GROUP = 4
PREFILL_CONFIG_BF16_WIDE = dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=2)
PREFILL_CONFIG_FP32 = dict(BLOCK_M=32, BLOCK_N=32, num_warps=4, num_stages=1)
# The chunk programs of the one-launch mixed attention (attention_mixed.py), whose warps and stages the launch's
# decode programs share. Not prefill_config's table: in a mixed step the decode programs already fill the GPU, so the
# chunks want few, tall query tiles (each re-reads its keys) rather than many. H200, Qwen2.5-7B, flat-shaped steps
# (benchmarks/gpu/mixed_attn_tiles.py, benchmarks/results/session33/): 146 decodes + 70 + 83 prompt tokens 84.3 us
# a layer against 90.9 with prefill_config's 64:64 x 4 (the decodes alone: 82.8); 200 + 40 + 48: 108.5 against
# 115.8; 96 + 150 + 120: 66.1 against 73.3. 8 warps lost (119-152 us). nano256 under flat, alternating processes:
# 7B 13,615.7 / 13,613.9 tok/s against 13,510.1 / 13,513.4; Qwen3-0.6B 25,611.1 / 25,600.3 against 25,399.4 / 25,424.3.
MIXED_CHUNK_CONFIG_BF16 = dict(BLOCK_M=128, BLOCK_N=32, num_warps=4, num_stages=2)


def decode_early_tile(dtype: torch.dtype) -> bool:
    """Whether the dedicated decode kernel's split launches load each split's first K/V tile (all but the step's
    own key) before their PDL wait, overlapping the kernel before (qkv_post). Default: 16-bit caches (an fp32
    tile held across the wait spills: 255 registers); TACHYON_DECODE_EARLY_TILE=1 / 0 forces it (tests run
    the fp32 interpreter through it)."""
    env = os.environ.get("TACHYON_DECODE_EARLY_TILE", "")
    return env == "1" if env in ("0", "1") else dtype != torch.float32


def decode_split_align(block_n: int) -> int:
    """Keys that the dedicated decode kernel's split lengths are multiples of: BLOCK_N by default;
    TACHYON_DECODE_SPLIT_ALIGN=n (an A/B knob, read per launch: a CUDA graph keeps what was in force at
    capture) makes a short context spread over more splits without shrinking the key tile."""
    env = os.environ.get("TACHYON_DECODE_SPLIT_ALIGN", "")
    if not env:
        return block_n
    if not env.isdigit() or int(env) < 1:
        raise ValueError(f"TACHYON_DECODE_SPLIT_ALIGN must be a positive number of keys, got {env!r}")
    return int(env)


def _env_tile(name: str) -> dict | None:
    """The query-tile config that environment variable `name` forces (BLOCK_M:BLOCK_N:num_warps:num_stages), or None
    when it is unset; a malformed value raises ValueError naming the variable."""
    env = os.environ.get(name, "")
    if not env:
        return None
    try:
        block_m, block_n, warps, stages = (int(v) for v in env.split(":"))
    except ValueError:
        raise ValueError(f"{name} must be BLOCK_M:BLOCK_N:num_warps:num_stages, got {env!r}") from None
    return dict(BLOCK_M=block_m, BLOCK_N=block_n, num_warps=warps, num_stages=stages)


def prefill_config(key: str, max_query_len: int, group: int = 1) -> dict:
    """Launch configuration of the prefill/extend kernel for dtype `key` ("bf16" / "fp32"), the step's longest
    query and `group`, the query heads a KV head packs (padded to a power of 2): PREFILL_CONFIG_BF16_WIDE for long
    queries of wide groups, else the first PREFILL_CONFIGS_BF16 row whose limit the query fits; fp32 has
    PREFILL_CONFIG_FP32.
    TACHYON_PREFILL_TILE = BLOCK_M:BLOCK_N:num_warps:num_stages overrides it (an A/B knob, read per launch: a CUDA
    graph keeps what was in force at capture)."""
    forced = _env_tile("TACHYON_PREFILL_TILE")
    if forced is not None:
        return forced
    if key == "fp32":
        return PREFILL_CONFIG_FP32
    if max_query_len >= PREFILL_WIDE_MIN_QUERY and group >= PREFILL_WIDE_MIN_GROUP:
        return PREFILL_CONFIG_BF16_WIDE
    return next(cfg for limit, cfg in PREFILL_CONFIGS_BF16 if max_query_len <= limit)


def mixed_chunk_config(key: str) -> dict:
    """Launch configuration of the one-launch mixed attention's chunk programs for dtype `key` ("bf16" / "fp32"):
    MIXED_CHUNK_CONFIG_BF16, or PREFILL_CONFIG_FP32. It does not depend on the step's rows, so the kernel has one
    compiled variant per dtype and head layout. TACHYON_MIXED_CHUNK_TILE = BLOCK_M:BLOCK_N:num_warps:num_stages
    overrides it (an A/B knob, read per launch: a CUDA graph keeps what was in force at capture)."""
    forced = _env_tile("TACHYON_MIXED_CHUNK_TILE")
    if forced is not None:
        return forced
    return PREFILL_CONFIG_FP32 if key == "fp32" else MIXED_CHUNK_CONFIG_BF16


# An unsplit decode launch of at most this many (sequence, KV head) programs a SM launches without PDL: launched
# early, its programs become resident while the kernel before runs, on whichever SMs have room, and a launch under one
# wave (the decode kernel fits 3 a SM at 168 registers) cannot rebalance them; near a full wave every SM must take its
# share anyway, and PDL's hidden launch gap wins. H200, Qwen2.5-7B, engine alone, alternating, TPOT of the rule
# against PDL: 64 sequences of 3-4K keys (256 programs) +1.5% / +1.6% output tok/s (5,342.3 / 5,335.9 against 5,259.2
# / 5,254.8; benchmarks/results/session40/), 64 and 48 sequences of 256-768 keys (256, 192 programs) 0.6-0.7% lower
# TPOT (session41/); at 96 sequences (384 programs, 2.9 a SM) withholding it raised TPOT 0.3% over 256-768 keys and
# was level over 2-2.5K keys (session41/), hence 2 a SM, not the occupancy's 3. 7B nano256 is level either way. Back
# to back, 64 x 4,096 keys take 168.3 µs a launch with PDL, 129.3 without.
DECODE_NO_PDL_PROGRAMS_PER_SM = 2


def attention_pdl(programs: int | None = None, num_sms: int = 0) -> bool:
    """Whether an attention launch uses programmatic dependent launch where the GPU has it. `programs` is an unsplit
    decode launch's program count (None: any other launch, which keeps PDL): off when it fits in
    DECODE_NO_PDL_PROGRAMS_PER_SM x num_sms. TACHYON_ATTN_PDL=1 / 0 forces it on / off for every decode and mixed
    attention launch (an A/B knob, read per launch: a CUDA graph keeps what was in force at capture); TACHYON_PDL=0
    turns PDL off for every kernel."""
    env = os.environ.get("TACHYON_ATTN_PDL", "")
    if env not in ("", "0", "1"):
        raise ValueError(f"TACHYON_ATTN_PDL must be 0 or 1, got {env!r}")
    if env:
        return env == "1"
    return programs is None or programs > DECODE_NO_PDL_PROGRAMS_PER_SM * num_sms


def mixed_decode_config(key: str) -> dict:
    """Launch configuration of the one-launch mixed attention's decode programs for dtype `key`: decode_config's
    unsplit one (its warps and stages give way to the chunk programs': one launch has one of each).
    TACHYON_MIXED_DECODE_TILE = BLOCK_N overrides the key tile (an A/B knob, read per launch: a CUDA graph keeps what
    was in force at capture)."""
    cfg = decode_config(key, False)
    env = os.environ.get("TACHYON_MIXED_DECODE_TILE", "")
    if not env:
        return cfg
    if not env.isdigit() or int(env) < 16 or int(env) & (int(env) - 1):
        raise ValueError(f"TACHYON_MIXED_DECODE_TILE must be a power of two >= 16 (keys), got {env!r}")
    return dict(cfg, BLOCK_N=int(env))


def decode_config(key: str, split: bool, fused: bool = False) -> dict:
    """Launch configuration of a decode kernel (the dedicated one, or with `fused` decode_fused.py's) for dtype
    `key` ("bf16" / "fp32"), its context split or not: SPLIT_DECODE_CONFIG for the dedicated kernel's bf16
    split launches, else DECODE_CONFIG. BLOCK_N:num_warps:num_stages in TACHYON_DECODE_TILE (the dedicated
    kernel's split launches), TACHYON_DECODE_FUSED_TILE (the fused kernel's) or TACHYON_DECODE_UNSPLIT_TILE (the
    dedicated kernel's unsplit launches, and the key tile of the one-launch mixed attention's decode programs)
    overrides it (A/B knobs, read per launch: a CUDA graph keeps what was in force at capture). BLOCK_N also
    rounds the split length (_split_len)."""
    if fused:
        name = "TACHYON_DECODE_FUSED_TILE" if split else ""
    else:
        name = "TACHYON_DECODE_TILE" if split else "TACHYON_DECODE_UNSPLIT_TILE"
    env = os.environ.get(name, "") if name else ""
    if not env:
        return SPLIT_DECODE_CONFIG if split and key == "bf16" and not fused else DECODE_CONFIG[key]
    try:
        block_n, warps, stages = (int(v) for v in env.split(":"))
    except ValueError:
        raise ValueError(f"{name} must be BLOCK_N:num_warps:num_stages, got {env!r}") from None
    return dict(BLOCK_N=block_n, num_warps=warps, num_stages=stages)


KV8_WIDEN_MODES = {"cvt": 0, "bits": 1, "asm": 2}  # quant_fp8.widen_cache_tile's WIDEN, by TACHYON_KV8_WIDEN's names
# An e4m3 cache's decode-only launches (the dedicated kernel's, the fused one's) of at least this many programs a
# multiprocessor widen K through the conversion unit and V by bit placement (cvt:asm), sharing the widening between
# that unit and the integer ALUs; smaller launches, split ones and the mixed launch convert both (cvt). H100 (stop 58,
# benchmarks/results/session47/s58a/ and s58b/, attn_kv_fp8.py, Qwen2.5-7B heads, in-graph µs, cvt -> cvt:asm): at
# 1,024 keys 64 sequences (256 programs, 1.9 a SM) 36.9 -> 41.0, 96 (2.9 a SM) 60.7 -> 53.9, 128 65.0 -> 58.3, 160
# 91.2 -> 85.2, 192 96.4 -> 94.2, 256 126.1 -> 110.2; 256 x 2,048 keys 242.6 -> 208.5, 64 x 2,048 65.7 -> 71.2.
# Below ~2 programs a SM the longer instruction stream costs a latency-bound launch more than the shared pipes save;
# 2.5 lies between the last loss and the first win. Whole 7B runs (stop 59, benchmarks/results/session48/): with the
# mixed launch counted too, nano256 lost 1.4-1.8%; without it nano256 is level (+0.1 / +0.3%) and a decode-bound run
# (128 x 2,048 + 768) gains 2.2-2.7%.
KV8_SPLIT_WIDEN_MIN_PROGRAMS_PER_SM = 2.5


def kv8_widen(cache_dtype: torch.dtype, device: torch.device, programs: int = 0) -> int:
    """How a decode launch (the dedicated kernel, the fused one, the mixed launch's decode programs) widens the K and V
    tiles of a cache of `cache_dtype`: k + 3 v, the quant_fp8.widen_cache_tile modes of its K and V tiles; 0 for any
    cache but e4m3. `programs`: a decode-only unsplit launch's (sequence, KV head) programs; 0 for a split launch
    (whose grid counts empty splits) and for the mixed launch. By default (or TACHYON_KV8_WIDEN=auto) launches of at
    least KV8_SPLIT_WIDEN_MIN_PROGRAMS_PER_SM programs a multiprocessor take cvt:asm, others cvt. Other values of
    TACHYON_KV8_WIDEN force one mode for both tiles, or K's and V's as `K:V`: cvt (Triton's conversion, one
    cvt.rn.f16x2.e4m3x2 per pair), bits (fp16 bit placement with integer ops) or asm (the same placement, one PTX
    sequence per four values); under the CPU's interpreter, which runs no PTX, asm means bits. Anything else raises
    ValueError naming the variable. An A/B knob, read per launch: a CUDA graph keeps what was in force at capture."""
    env = os.environ.get("TACHYON_KV8_WIDEN", "")
    names = env.split(":") if env.count(":") == 1 else [env, env]
    if env and env != "auto" and any(n not in KV8_WIDEN_MODES for n in names):
        raise ValueError(f"TACHYON_KV8_WIDEN must be 'auto', one of {sorted(KV8_WIDEN_MODES)} or two of them as K:V, "
                         f"got {env!r}")
    if cache_dtype != torch.float8_e4m3fn:
        return 0
    if env in ("", "auto"):
        names = ["cvt", "asm" if 0 < programs and programs >= KV8_SPLIT_WIDEN_MIN_PROGRAMS_PER_SM * sm_count(device)
                        else "cvt"]
    k, v = (1 if KV8_WIDEN_MODES[n] == 2 and device.type == "cpu" else KV8_WIDEN_MODES[n] for n in names)
    return k + 3 * v


def decode_fused_early_tile() -> bool:
    """Whether decode_fused.py's kernel loads each split's first tile of cached keys before its PDL wait:
    off unless TACHYON_DECODE_FUSED_EARLY_TILE=1 (at batch 1 it made the fused kernel 0.027 ms per step faster
    on Qwen2.5-7B yet no faster than the dedicated path; not measured at B >= 2, where the fused kernel runs:
    benchmarks/results/prefill_session10/fused_bs1_b8706b5/). Read per launch, like the other knobs."""
    return os.environ.get("TACHYON_DECODE_FUSED_EARLY_TILE", "0") == "1"


def mixed_one_launch() -> bool:
    """Whether a mixed step's attention (decode rows beside prompt chunks) runs as one launch (attention_mixed.py,
    the default, TACHYON_MIXED_ATTN=one) or as the decode kernel then the prefill kernel (TACHYON_MIXED_ATTN=two).
    An A/B knob read per forward: a CUDA graph keeps what was in force at capture. On the H200 one launch cut a 7B
    mixed step's GPU time by 0-2.3% and made the flat policy's nano256 1.4% faster (stop 37); a cold 7B start-up
    with it took 18.4 s (two launches: 17.0) and requests arriving at 8/s saw the same TTFT and throughput (stop 38)."""
    env = os.environ.get("TACHYON_MIXED_ATTN", "")
    if env not in ("", "one", "two"):
        raise ValueError(f"TACHYON_MIXED_ATTN must be 'one' or 'two', got {env!r}")
    return env != "two"


# Decode launches whose grid holds at least this many (sequence, KV head) programs per multiprocessor are dispatched
# longest first by default (decode_graph_order). H200 per-layer sweep (stop 42, benchmarks/gpu/decode_order_sweep.py,
# contexts 100-3,000): at 512 programs and more on 132 SMs longest first cut the dedicated decode kernel's time 0-16%
# (7B 146 decodes in a 160 bucket, contexts 200-1,600: 83.0 -> 69.9 us), at 192-384 it added 3-12% (7B 96: 55.4 ->
# 61.3; one exception, 0.6B's 32-bucket at 256: -3%). 3.5 lies between the last loss (2.9) and the first win (3.9).
DECODE_ORDER_MIN_PROGRAMS_PER_SM = 3.5


def decode_graph_order(num_seqs: int, num_kv_heads: int, device: torch.device) -> bool:
    """Whether the decode graph of a `num_seqs`-sequence bucket hands the decode attention its sequences longest
    first (the kernel then dispatches every program of one sequence together, longest first) rather than in batch
    order. TACHYON_DECODE_ORDER=lpt: every bucket of more than one sequence; =batch: none; unset (the default):
    launches of at least DECODE_ORDER_MIN_PROGRAMS_PER_SM (sequence, KV head) programs per multiprocessor of
    `device`, several waves, whose last would otherwise hold long sequences that started late (such a grid never
    splits the context, so it is the dedicated decode kernel's). Smaller grids (192-384 programs on 132 SMs)
    measured 3-12% slower longest first, and the fused kernel's split launches (2-32 sequences, stop 43) -3% to +8%
    with no direction. Any other value of the variable raises
    ValueError naming it. Read when a decode graph runner is built: its graphs keep it."""
    env = _order_knob("TACHYON_DECODE_ORDER")
    if num_seqs < 2 or env == "batch":
        return False
    if env == "lpt":
        return True
    return num_seqs * num_kv_heads >= DECODE_ORDER_MIN_PROGRAMS_PER_SM * sm_count(device)


def mixed_decode_order() -> bool:
    """Whether the mixed graphs hand the one-launch mixed attention their decode sequences longest first
    (the default, TACHYON_MIXED_ORDER=lpt: the kernel then dispatches its programs heaviest first, every KV head of
    one program index before the next, so the launch's last wave holds the shortest sequences) or leaves them in
    batch order (TACHYON_MIXED_ORDER=batch). On the H200 (stop 41) longest first cut the attention of three
    flat-shaped 7B steps by 10-19% (84.3 -> 75.5 us a layer on the typical one) and made 7B nano256 0.8% faster
    (13,822.7 against 13,710.0 tok/s, alternating runs). Read when a mixed graph runner is built: its graphs keep it."""
    return _longest_first("TACHYON_MIXED_ORDER", default=True)


def _longest_first(name: str, default: bool) -> bool:
    """An order knob as a switch: 'lpt' (longest first) True, 'batch' False, unset `default` (_order_knob)."""
    env = _order_knob(name)
    return default if not env else env == "lpt"


def _order_knob(name: str) -> str:
    """Environment variable `name` as an order knob: 'lpt', 'batch' or '' (unset); any other value raises ValueError
    naming the variable."""
    env = os.environ.get(name, "")
    if env not in ("", "batch", "lpt"):
        raise ValueError(f"{name} must be 'batch' or 'lpt', got {env!r}")
    return env
