"""A whole decoder layer at batch 1 in one launch: a persistent grid that runs the layer's five phases with a grid
barrier between them, so a decode step launches one kernel per layer instead of ten; or the same code as five launches
(`phases`), the engine's default at batch 1 on H100s for shapes that fit (layer_bs1_knobs.layer_bs1_mode).

Contract of `decoder_layer_bs1(x, residual, lw, kv_cache, cos_sin_cache, slot_mapping, seq_lens, block_tables,
max_seq_len) -> (y, h2)` (reference and Triton alike):

- x [1, H] is the layer input (the previous layer's MLP output, or the embedding), residual [1, H] the residual
  stream or None (the first layer: x is the stream). Both contiguous, the model's dtype.
- lw (`LayerBs1Weights`) holds the layer's parameters in the model's dtype, each contiguous: the input norm, the
  fused q|k|v projection [(Hq + 2 Hkv) D, H] (+ bias), the per-head q/k norms (Qwen3) or None, o_proj [H, Hq D],
  the post-attention norm, the fused gate|up projection [2 I, H] and down_proj [H, I].
- The decode token sits at position seq_lens[0] - 1; kv_cache, cos_sin_cache, slot_mapping, block_tables and
  max_seq_len as in `decode_qkv_attention` (decode_fused.py): its rotated K and raw V go to slot_mapping[0].
- Returns y = the MLP output [1, H] and h2 = the residual stream after the attention block [1, H], what
  `DecoderLayer.forward` returns. x and residual are read only.

The reference is the layer's unfused path: rmsnorm_gemv, decode_qkv_attention, gemv, rmsnorm_gemv, silu_gemv.
The Triton kernel computes the same values with the same roundings as the fused batch-1 kernels (the norm's 1/rms
scales the finished dot products, so the normalised row is never rounded); it differs from the reference only by
fp32 sum orders and that rounding.

Phases (program p of NPROG, one per multiprocessor): 0 qkv rows p*RA.. with the input norm in the prologue;
1 attention, one (KV head, split) item per program, (q/k norm,) rotary and the K/V store as decode_fused.py's
kernel, splits merged by the last to finish; 2 o_proj rows; 3 gate|up row pairs with the post-attention norm in the
prologue and SiLU-and-mul in the epilogue; 4 down_proj rows. Each program loads its weight rows of the next phase
before the barrier that precedes it, so weights stream while the grid waits, and (one attention item per program)
its split's first tile of cached keys at the launch's start. Values one phase writes and another
reads go through small scratch buffers and are loaded with .cg (L2, never a stale L1 line).

The barrier needs every program resident at once: NPROG is at most the multiprocessor count and the kernel's
resources allow one program per multiprocessor (compile_check.py reports them). Under Triton's interpreter,
which runs programs one after another, a barrier cannot be passed, so `phases=True` launches the five phases as
five kernels (the same code, no barrier): the CPU tests run that form, the GPU tests compare both forms.

The phases' device-side building blocks (row blocks, the grid barrier, an attention item) are in layer_bs1_parts.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from tachyon.kernels._triton import (
    NeedsEagerRun,
    next_pow2,
    pdl_args,
    pdl_trigger,
    require_triton,
    sm_count,
    sync_counters,
    tl,
    triton,
)
from tachyon.kernels.attention_config import decode_config
from tachyon.kernels.decode_fused import decode_qkv_attention_ref
from tachyon.kernels.gemv import gemv_ref, rmsnorm_gemv_ref, silu_gemv_ref
from tachyon.kernels.layer_bs1_knobs import (
    layer_bs1_early_tile,
    layer_bs1_gemv_programs,
    layer_bs1_phase_warps,
    layer_bs1_prefetch,
    layer_bs1_warps,
)
from tachyon.kernels.layer_bs1_parts import (
    _attend,
    _enter,
    _enter_layer,
    _first_tile,
    _row_block,
    _vector,
)
from tachyon.kernels.split_kv import INLINE_MERGE_SPLITS, MAX_KV_SPLITS, MIN_SPLIT_KEYS

# most weight elements one program holds for one phase (its row block, whole K): beyond it the tiles spill
MAX_TILE_ELEMENTS = 1 << 16


@dataclass
class LayerBs1Weights:
    """One decoder layer's parameters as the batch-1 layer kernel reads them (views of the model's; not owned)."""
    in_norm: torch.Tensor
    qkv: torch.Tensor
    qkv_bias: torch.Tensor | None
    q_norm: torch.Tensor | None
    k_norm: torch.Tensor | None
    o: torch.Tensor
    post_norm: torch.Tensor
    gate_up: torch.Tensor
    down: torch.Tensor
    eps: float
    qk_eps: float
    num_heads: int
    num_kv_heads: int
    head_dim: int
    scale: float


def _rows_per_program(n: int, programs: int) -> int:
    return -(-n // programs)


def layer_bs1_fits(lw: LayerBs1Weights, programs: int) -> bool:
    """Whether every phase's row block fits MAX_TILE_ELEMENTS at `programs` programs (e.g. Qwen3-0.6B on 132
    multiprocessors; not Qwen2.5-7B, whose row blocks would spill)."""
    H = lw.in_norm.shape[0]
    inter = lw.down.shape[1]
    blocks = ((lw.qkv.shape[0], H), (H, lw.o.shape[1]), (inter, 2 * H), (H, inter))
    return all(next_pow2(_rows_per_program(n, programs)) * next_pow2(k) <= MAX_TILE_ELEMENTS for n, k in blocks)


def _check(x: torch.Tensor, residual: torch.Tensor | None, lw: LayerBs1Weights, kv_cache: torch.Tensor) -> None:
    H = lw.in_norm.shape[0]
    if x.shape != (1, H) or (residual is not None and residual.shape != (1, H)):
        raise ValueError(f"x and residual must be [1, {H}], got {tuple(x.shape)}"
                         f"{'' if residual is None else ' and ' + str(tuple(residual.shape))}")
    qkv_rows = (lw.num_heads + 2 * lw.num_kv_heads) * lw.head_dim
    if lw.qkv.shape != (qkv_rows, H):
        raise ValueError(f"qkv weight must be [{qkv_rows}, {H}], got {tuple(lw.qkv.shape)}")
    if lw.o.shape != (H, lw.num_heads * lw.head_dim) or lw.gate_up.shape[1] != H or lw.gate_up.shape[0] % 2:
        raise ValueError(f"o_proj {tuple(lw.o.shape)} / gate_up {tuple(lw.gate_up.shape)} do not match hidden {H}")
    if lw.down.shape != (H, lw.gate_up.shape[0] // 2):
        raise ValueError(f"down_proj must be [{H}, {lw.gate_up.shape[0] // 2}], got {tuple(lw.down.shape)}")
    if tuple(kv_cache.shape[-2:]) != (lw.num_kv_heads, lw.head_dim):
        raise ValueError(f"kv_cache heads/dim {tuple(kv_cache.shape[-2:])} != ({lw.num_kv_heads}, {lw.head_dim})")


def decoder_layer_bs1_ref(x: torch.Tensor, residual: torch.Tensor | None, lw: LayerBs1Weights,
                          kv_cache: torch.Tensor, cos_sin_cache: torch.Tensor, slot_mapping: torch.Tensor,
                          seq_lens: torch.Tensor, block_tables: torch.Tensor, max_seq_len: int,
                          num_programs: int = 0, phases: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Plain torch: the unfused kernels' references in the layer's order (num_programs and phases, which only
    shape the Triton launch, are ignored)."""
    _check(x, residual, lw, kv_cache)
    qkv, h1 = rmsnorm_gemv_ref(x, residual, lw.in_norm, lw.eps, lw.qkv, lw.qkv_bias)
    qsl = torch.arange(2, dtype=torch.int32, device=x.device)
    attn = decode_qkv_attention_ref(qkv, cos_sin_cache, kv_cache, slot_mapping, lw.q_norm, lw.k_norm, lw.qk_eps,
                                    lw.num_heads, lw.num_kv_heads, lw.head_dim, qsl, seq_lens, block_tables,
                                    max_seq_len, lw.scale)
    o = gemv_ref(attn.reshape(1, -1), lw.o)
    gate_up, h2 = rmsnorm_gemv_ref(o, h1, lw.post_norm, lw.eps, lw.gate_up)
    return silu_gemv_ref(gate_up, lw.down), h2


# ----------------------------------------------------------------------------------------------
# Triton


@triton.jit
def _layer_phases(
    pid, first_layer,
    x_ptr, res_ptr, h1_ptr, in_nw_ptr, wqkv_ptr, bqkv_ptr, qkv_ptr,
    cs_ptr, cache_ptr, slot_ptr, qw_ptr, kw_ptr, seq_lens_ptr, bt_ptr, attn_ptr, mid_o_ptr, mid_lse_ptr, cnt_ptr,
    wo_ptr, o_ptr, post_nw_ptr, wgu_ptr, act_ptr, h2_ptr, wd_ptr, y_ptr, bar_ptr,
    eps, qk_eps, scale, num_splits,
    stride_cs, stride_c_kv, stride_c_blk, stride_c_tok, stride_c_h,
    H: tl.constexpr, BLOCK_H: tl.constexpr, NQKV: tl.constexpr, Hq: tl.constexpr, Hkv: tl.constexpr,
    G: tl.constexpr, D: tl.constexpr, HALF: tl.constexpr, ROT: tl.constexpr, INTER: tl.constexpr,
    BLOCK_QO: tl.constexpr, BLOCK_I: tl.constexpr, PAGE: tl.constexpr,
    RA: tl.constexpr, BLOCK_RA: tl.constexpr, RO: tl.constexpr, BLOCK_RO: tl.constexpr,
    RG: tl.constexpr, BLOCK_RG: tl.constexpr, RD: tl.constexpr, BLOCK_RD: tl.constexpr,
    BLOCK_G: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr, PREC: tl.constexpr,
    LSE_S: tl.constexpr, MERGE_S: tl.constexpr, HAS_RES: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_NORM: tl.constexpr,
    NPROG: tl.constexpr, FIRST: tl.constexpr, LAST: tl.constexpr, PDL: tl.constexpr, EARLY: tl.constexpr,
    ATTN_EARLY: tl.constexpr, IN_LOOP: tl.constexpr,
):
    """Phases FIRST .. LAST of one layer for program pid (module docstring), a grid barrier between two. The
    first phase starts after the previous kernel (pdl_wait), or with IN_LOOP (the model kernel) after the grid
    barrier unless `first_layer`. Weights, norm weights, the step inputs (seq_lens, block table) and cached keys
    of earlier steps (ATTN_EARLY's first tile) are read before that wait; x and residual after it, through L2
    (the model kernel wrote them). EARLY: the later phases' weight rows are loaded a phase sooner
    (layer_bs1_prefetch). h1 (the stream after the previous MLP) is written by program 0 when there is a
    residual, else it is x (the caller passes x as h1)."""

    dt = x_ptr.dtype.element_ty
    # the attention phase's first tile of cached keys, with the launch's first weights (ATTN_EARLY: every program
    # has at most one attention item)
    if ATTN_EARLY:
        if FIRST <= 1:
            if LAST >= 1:
                k0, v0, nmask0 = _first_tile(pid, seq_lens_ptr, bt_ptr, cache_ptr, num_splits, stride_c_kv,
                                             stride_c_blk, stride_c_tok, stride_c_h, Hkv, D, BLOCK_D, BLOCK_N, PAGE)
    # phase 0: qkv = rmsnorm(x + residual) @ Wqkv^T (+ b)
    if FIRST == 0:
        wa, ra, ma = _row_block(wqkv_ptr, pid * RA, RA, NQKV, H, BLOCK_RA, BLOCK_H)
        nw = _vector(in_nw_ptr, H, BLOCK_H, False).to(tl.float32)
        if HAS_BIAS:
            ba = tl.load(bqkv_ptr + ra, mask=ma, other=0.0).to(tl.float32)
        _enter_layer(first_layer, bar_ptr, NPROG, PDL, IN_LOOP)
        h = _vector(x_ptr, H, BLOCK_H, True)
        if HAS_RES:
            if IN_LOOP:  # the model kernel's first layer has no residual: the stream is x
                if not first_layer:
                    h = (h.to(tl.float32) + _vector(res_ptr, H, BLOCK_H, True).to(tl.float32)).to(dt)
            else:
                h = (h.to(tl.float32) + _vector(res_ptr, H, BLOCK_H, True).to(tl.float32)).to(dt)
            if pid == 0:
                tl.store(h1_ptr + tl.arange(0, BLOCK_H), h, mask=tl.arange(0, BLOCK_H) < H)
        hf = h.to(tl.float32)
        rstd = tl.rsqrt(tl.sum(hf * hf, 0) / H + eps)
        ya = tl.sum(wa.to(tl.float32) * (hf * nw)[None, :], 1) * rstd
        if HAS_BIAS:
            ya += ba
        tl.store(qkv_ptr + ra, ya.to(dt), mask=ma)
    # phase 1: attention, items (KV head, split); the o_proj rows are loaded after this program's items
    if FIRST <= 1:
        if LAST >= 1:
            S = tl.load(seq_lens_ptr)
            _enter(1, FIRST, bar_ptr, NPROG, PDL)
            if ATTN_EARLY:
                if pid < Hkv * num_splits:
                    _attend(pid, qkv_ptr, cs_ptr, cache_ptr, slot_ptr, qw_ptr, kw_ptr, attn_ptr, mid_o_ptr,
                            mid_lse_ptr, cnt_ptr, S, bt_ptr, scale, qk_eps, num_splits, stride_cs, stride_c_kv,
                            stride_c_blk, stride_c_tok, stride_c_h, Hq, Hkv, G, D, HALF, ROT, HAS_NORM, PAGE,
                            BLOCK_G, BLOCK_D, BLOCK_N, PREC, LSE_S, MERGE_S, k0, v0, nmask0, True)
            else:
                dd = tl.arange(0, BLOCK_D)
                for item in range(pid, Hkv * num_splits, NPROG):
                    _attend(item, qkv_ptr, cs_ptr, cache_ptr, slot_ptr, qw_ptr, kw_ptr, attn_ptr, mid_o_ptr,
                            mid_lse_ptr, cnt_ptr, S, bt_ptr, scale, qk_eps, num_splits, stride_cs, stride_c_kv,
                            stride_c_blk, stride_c_tok, stride_c_h, Hq, Hkv, G, D, HALF, ROT, HAS_NORM, PAGE,
                            BLOCK_G, BLOCK_D, BLOCK_N, PREC, LSE_S, MERGE_S, dd, dd, dd < D, False)
    # phase 2: o = attn @ Wo^T. EARLY: the gate|up rows are loaded with the o_proj rows (programs without an
    # attention item issue both at once, so DRAM streams during the latency-bound attention), and the down rows
    # right after the o_proj rows are used
    if FIRST <= 2:
        if LAST >= 2:
            wo, ro, mo = _row_block(wo_ptr, pid * RO, RO, H, Hq * D, BLOCK_RO, BLOCK_QO)
            if EARLY:
                if LAST >= 3:
                    wg, rg, mg = _row_block(wgu_ptr, pid * RG, RG, INTER, H, BLOCK_RG, BLOCK_H)
                    wu, ru, mu = _row_block(wgu_ptr + INTER * H, pid * RG, RG, INTER, H, BLOCK_RG, BLOCK_H)
            _enter(2, FIRST, bar_ptr, NPROG, PDL)
            a = _vector(attn_ptr, Hq * D, BLOCK_QO, True).to(tl.float32)
            tl.store(o_ptr + ro, tl.sum(wo.to(tl.float32) * a[None, :], 1).to(dt), mask=mo)
            if EARLY:
                if LAST >= 4:
                    wd, rd, md = _row_block(wd_ptr, pid * RD, RD, H, INTER, BLOCK_RD, BLOCK_I)
    # phase 3: gate|up = rmsnorm(o + h1) @ Wgu^T, act = silu(gate) * up; program 0 writes h2 = o + h1
    if FIRST <= 3:
        if LAST >= 3:
            if (not EARLY) or FIRST == 3:  # else loaded in phase 2
                wg, rg, mg = _row_block(wgu_ptr, pid * RG, RG, INTER, H, BLOCK_RG, BLOCK_H)
                wu, ru, mu = _row_block(wgu_ptr + INTER * H, pid * RG, RG, INTER, H, BLOCK_RG, BLOCK_H)
            nw2 = _vector(post_nw_ptr, H, BLOCK_H, False).to(tl.float32)
            _enter(3, FIRST, bar_ptr, NPROG, PDL)
            h2 = (_vector(o_ptr, H, BLOCK_H, True).to(tl.float32)
                  + _vector(h1_ptr, H, BLOCK_H, True).to(tl.float32)).to(dt)
            if pid == 0:
                tl.store(h2_ptr + tl.arange(0, BLOCK_H), h2, mask=tl.arange(0, BLOCK_H) < H)
            hf2 = h2.to(tl.float32)
            rstd2 = tl.rsqrt(tl.sum(hf2 * hf2, 0) / H + eps)
            hn2 = (hf2 * nw2)[None, :]
            gate = (tl.sum(wg.to(tl.float32) * hn2, 1) * rstd2).to(dt).to(tl.float32)
            up = (tl.sum(wu.to(tl.float32) * hn2, 1) * rstd2).to(dt).to(tl.float32)
            act = (gate / (1.0 + tl.exp(-gate))).to(dt).to(tl.float32)
            tl.store(act_ptr + rg, (act * up).to(dt), mask=mg)
    # phase 4: y = act @ Wd^T
    if LAST >= 4:
        if (not EARLY) or FIRST >= 3:  # else loaded in phase 2
            wd, rd, md = _row_block(wd_ptr, pid * RD, RD, H, INTER, BLOCK_RD, BLOCK_I)
        _enter(4, FIRST, bar_ptr, NPROG, PDL)
        av = _vector(act_ptr, INTER, BLOCK_I, True).to(tl.float32)
        tl.store(y_ptr + rd, tl.sum(wd.to(tl.float32) * av[None, :], 1).to(dt), mask=md)




@triton.jit(do_not_specialize=["num_splits"])
def _layer_bs1_kernel(
    x_ptr, res_ptr, h1_ptr, in_nw_ptr, wqkv_ptr, bqkv_ptr, qkv_ptr,
    cs_ptr, cache_ptr, slot_ptr, qw_ptr, kw_ptr, seq_lens_ptr, bt_ptr, attn_ptr, mid_o_ptr, mid_lse_ptr, cnt_ptr,
    wo_ptr, o_ptr, post_nw_ptr, wgu_ptr, act_ptr, h2_ptr, wd_ptr, y_ptr, bar_ptr,
    eps, qk_eps, scale, num_splits,
    stride_cs, stride_c_kv, stride_c_blk, stride_c_tok, stride_c_h,
    H: tl.constexpr, BLOCK_H: tl.constexpr, NQKV: tl.constexpr, Hq: tl.constexpr, Hkv: tl.constexpr,
    G: tl.constexpr, D: tl.constexpr, HALF: tl.constexpr, ROT: tl.constexpr, INTER: tl.constexpr,
    BLOCK_QO: tl.constexpr, BLOCK_I: tl.constexpr, PAGE: tl.constexpr,
    RA: tl.constexpr, BLOCK_RA: tl.constexpr, RO: tl.constexpr, BLOCK_RO: tl.constexpr,
    RG: tl.constexpr, BLOCK_RG: tl.constexpr, RD: tl.constexpr, BLOCK_RD: tl.constexpr,
    BLOCK_G: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr, PREC: tl.constexpr,
    LSE_S: tl.constexpr, MERGE_S: tl.constexpr, HAS_RES: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_NORM: tl.constexpr,
    NPROG: tl.constexpr, FIRST: tl.constexpr, LAST: tl.constexpr, PDL: tl.constexpr, EARLY: tl.constexpr = False,
    ATTN_EARLY: tl.constexpr = False,
):
    """One layer, phases FIRST .. LAST (_layer_phases); the first waits for the previous kernel."""
    pdl_trigger(PDL)
    _layer_phases(
        tl.program_id(0), True, x_ptr, res_ptr, h1_ptr, in_nw_ptr, wqkv_ptr, bqkv_ptr, qkv_ptr, cs_ptr, cache_ptr,
        slot_ptr, qw_ptr, kw_ptr, seq_lens_ptr, bt_ptr, attn_ptr, mid_o_ptr, mid_lse_ptr, cnt_ptr, wo_ptr, o_ptr,
        post_nw_ptr, wgu_ptr, act_ptr, h2_ptr, wd_ptr, y_ptr, bar_ptr, eps, qk_eps, scale, num_splits, stride_cs,
        stride_c_kv, stride_c_blk, stride_c_tok, stride_c_h, H, BLOCK_H, NQKV, Hq, Hkv, G, D, HALF, ROT, INTER,
        BLOCK_QO, BLOCK_I, PAGE, RA, BLOCK_RA, RO, BLOCK_RO, RG, BLOCK_RG, RD, BLOCK_RD, BLOCK_G, BLOCK_D,
        BLOCK_N, PREC, LSE_S, MERGE_S, HAS_RES, HAS_BIAS, HAS_NORM, NPROG, FIRST, LAST, PDL, EARLY, ATTN_EARLY,
        False)


_BARRIERS: dict[str, torch.Tensor] = {}


def grid_barrier(device: torch.device) -> torch.Tensor:
    """The grid barrier's two int32 words on `device` (arrivals, generation), shared by every launch: each leaves
    the arrival count zero. Allocated outside CUDA-graph capture (a shape's first launch runs eagerly first)."""
    if device.type == "cuda" and device.index is None:  # "cuda" and "cuda:0" are one buffer
        device = torch.device("cuda", torch.cuda.current_device())
    key = str(device)
    if key not in _BARRIERS:
        if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
            raise NeedsEagerRun("layer_bs1 grid barrier: allocate it with an eager launch before capture")
        _BARRIERS[key] = torch.zeros(2, dtype=torch.int32, device=device)
    return _BARRIERS[key]


def layer_bs1_splits(max_seq_len: int, num_kv_heads: int, programs: int) -> int:
    """KV splits per head of the attention phase: at most one (KV head, split) item per program, splits of at
    least MIN_SPLIT_KEYS keys of max_seq_len (a short context uses only the first few: _split_len)."""
    return max(1, min(-(-max_seq_len // MIN_SPLIT_KEYS), programs // num_kv_heads, MAX_KV_SPLITS))


def _row_consts(lw: LayerBs1Weights, programs: int) -> dict:
    """Each projection phase's rows per program (RA qkv, RO o_proj, RG gate|up pairs, RD down) and their blocks."""
    H, inter = lw.in_norm.shape[0], lw.down.shape[1]
    ra, ro, rg, rd = (_rows_per_program(n, programs) for n in (lw.qkv.shape[0], H, inter, H))
    return dict(RA=ra, BLOCK_RA=next_pow2(ra), RO=ro, BLOCK_RO=next_pow2(ro), RG=rg, BLOCK_RG=next_pow2(rg), RD=rd,
                BLOCK_RD=next_pow2(rd))


def _prepare(x: torch.Tensor, lw: LayerBs1Weights, kv_cache: torch.Tensor, cos_sin_cache: torch.Tensor,
             block_tables: torch.Tensor, max_seq_len: int, num_programs: int, one_launch: bool) -> tuple[dict, dict]:
    """(the launch's constexprs and scalars, its scratch buffers) for layers shaped as `lw` over caches shaped as
    `kv_cache`. Scratch is owned by the caller's launch (CUDA-graph pool memory under capture)."""
    require_triton()
    assert x.is_contiguous() and kv_cache.is_contiguous()
    assert cos_sin_cache.stride(-1) == 1 and block_tables.stride(-1) == 1
    for t in (lw.in_norm, lw.qkv, lw.o, lw.post_norm, lw.gate_up, lw.down):
        assert t.is_contiguous() and t.dtype == x.dtype, "layer weights: contiguous, in x's dtype"
    dev, dt = x.device, x.dtype
    H, Hq, Hkv, D = x.shape[1], lw.num_heads, lw.num_kv_heads, lw.head_dim
    inter = lw.down.shape[1]
    nprog = num_programs or sm_count(dev)
    if one_launch and dev.type == "cuda" and nprog > sm_count(dev):
        raise ValueError(f"num_programs {nprog} exceeds the {sm_count(dev)} multiprocessors: the one-launch form's "
                         f"grid barrier needs every program resident at once")
    splits = layer_bs1_splits(max_seq_len, Hkv, nprog)
    scratch = dict(qkv=torch.empty(lw.qkv.shape[0], dtype=dt, device=dev),
                   attn=torch.empty(Hq * D, dtype=dt, device=dev), o=torch.empty(H, dtype=dt, device=dev),
                   act=torch.empty(inter, dtype=dt, device=dev),
                   mid_o=torch.empty(Hq, splits, D, dtype=torch.float32, device=dev),
                   mid_lse=torch.empty(Hq, splits, dtype=torch.float32, device=dev),
                   cnt=sync_counters(dev, Hkv), bar=grid_barrier(dev))
    rot = cos_sin_cache.shape[-1]
    cfg = decode_config("fp32" if dt == torch.float32 else "bf16", True)
    consts = dict(
        H=H, BLOCK_H=next_pow2(H), NQKV=lw.qkv.shape[0], Hq=Hq, Hkv=Hkv, G=Hq // Hkv, D=D, HALF=rot // 2, ROT=rot,
        INTER=inter, BLOCK_QO=next_pow2(Hq * D), BLOCK_I=next_pow2(inter), PAGE=kv_cache.shape[2],
        **_row_consts(lw, nprog), BLOCK_G=max(16, next_pow2(Hq // Hkv)), BLOCK_D=max(16, next_pow2(D)),
        BLOCK_N=cfg["BLOCK_N"], PREC="ieee" if dt == torch.float32 else "tf32",
        HAS_BIAS=lw.qkv_bias is not None, HAS_NORM=lw.q_norm is not None, LSE_S=MAX_KV_SPLITS,
        MERGE_S=INLINE_MERGE_SPLITS, NPROG=nprog, num_warps=layer_bs1_warps(), EARLY=layer_bs1_prefetch() == "early",
        ATTN_EARLY=Hkv * splits <= nprog and layer_bs1_early_tile(), **pdl_args(dev),
    )
    return consts, dict(scratch, splits=splits, nprog=nprog)


def decoder_layer_bs1_triton(x: torch.Tensor, residual: torch.Tensor | None, lw: LayerBs1Weights,
                             kv_cache: torch.Tensor, cos_sin_cache: torch.Tensor, slot_mapping: torch.Tensor,
                             seq_lens: torch.Tensor, block_tables: torch.Tensor, max_seq_len: int,
                             num_programs: int = 0, phases: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Triton: one launch of num_programs (default: the multiprocessor count) programs with grid barriers, or with
    `phases` five launches of one phase each (no barrier; the interpreter's form)."""
    _check(x, residual, lw, kv_cache)
    assert residual is None or residual.is_contiguous()
    consts, sc = _prepare(x, lw, kv_cache, cos_sin_cache, block_tables, max_seq_len, num_programs, not phases)
    h1 = torch.empty_like(x) if residual is not None else x
    h2, y = torch.empty_like(x), torch.empty_like(x)
    has_norm = lw.q_norm is not None
    qw = lw.q_norm if has_norm else x  # unused placeholders without the norm / bias
    kw = lw.k_norm if has_norm else x
    args = (x, residual if residual is not None else x, h1, lw.in_norm, lw.qkv,
            lw.qkv_bias if lw.qkv_bias is not None else x, sc["qkv"], cos_sin_cache, kv_cache, slot_mapping, qw, kw,
            seq_lens, block_tables, sc["attn"], sc["mid_o"], sc["mid_lse"], sc["cnt"], lw.o, sc["o"], lw.post_norm,
            lw.gate_up, sc["act"], h2, lw.down, y, sc["bar"], lw.eps, lw.qk_eps, lw.scale, sc["splits"],
            cos_sin_cache.stride(0), kv_cache.stride(0), kv_cache.stride(1), kv_cache.stride(2), kv_cache.stride(3))
    if not phases:
        _layer_bs1_kernel[(sc["nprog"],)](*args, FIRST=0, LAST=4, HAS_RES=residual is not None, **consts)
        return y, h2
    warps = layer_bs1_phase_warps() or (consts["num_warps"],) * 5
    gemv_prog = sc["nprog"] * layer_bs1_gemv_programs()
    gemv_consts = dict(consts, **_row_consts(lw, gemv_prog), NPROG=gemv_prog)
    for k in range(5):
        c, grid = (consts, sc["nprog"]) if k == 1 else (gemv_consts, gemv_prog)
        _layer_bs1_kernel[(grid,)](*args, FIRST=k, LAST=k, HAS_RES=residual is not None, **dict(c, num_warps=warps[k]))
    return y, h2
