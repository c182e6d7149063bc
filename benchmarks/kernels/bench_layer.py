"""The batch-1 decoder-layer kernel (kernels/layer_bs1.py) of run_all.py at the Qwen3-0.6B layer shape (the 7B's row
blocks do not fit it): the one-launch and five-launch forms against the unfused reference, timed against the
layer's floor (its weight bytes plus the KV it reads, at the copy bandwidth). Rows go to harness.ROWS."""

import math
import os

import torch
from harness import DEV, DT, PAGE, SMOKE, guarded, record
from timing import rel_err

import tachyon.kernels as K

# Qwen3-0.6B: hidden, heads, KV heads, head dim, intermediate
H6, HQ6, HKV6, D6, I6 = (1024, 16, 8, 128, 3072) if not SMOKE else (64, 4, 2, 16, 96)


def layer_case(ctx: int, max_seq_len: int, gen) -> dict:
    """Random Qwen3-0.6B-shaped layer weights and one decode token at position ctx - 1 over a shuffled paged cache."""
    def rnd(*shape, scale=1.0, shift=0.0):
        return shift + scale * torch.randn(*shape, device=DEV, dtype=DT, generator=gen)

    lw = K.LayerBs1Weights(
        rnd(H6, scale=0.1, shift=1.0), rnd((HQ6 + 2 * HKV6) * D6, H6, scale=H6 ** -0.5), None,
        rnd(D6, scale=0.1, shift=1.0), rnd(D6, scale=0.1, shift=1.0), rnd(H6, HQ6 * D6, scale=(HQ6 * D6) ** -0.5),
        rnd(H6, scale=0.1, shift=1.0), rnd(2 * I6, H6, scale=H6 ** -0.5), rnd(H6, I6, scale=I6 ** -0.5),
        1e-6, 1e-6, HQ6, HKV6, D6, 1 / math.sqrt(D6))
    nblk = -(-max_seq_len // PAGE)
    table = torch.randperm(nblk + 1, device=DEV, generator=gen)[:nblk].to(torch.int32)[None, :]
    slot = int(table[0, (ctx - 1) // PAGE]) * PAGE + (ctx - 1) % PAGE
    inv = 1.0 / (1e6 ** (torch.arange(0, D6, 2, dtype=torch.float32) / D6))
    return dict(x=rnd(1, H6), residual=rnd(1, H6), lw=lw,
                kv_cache=torch.randn(2, nblk + 1, PAGE, HKV6, D6, device=DEV, dtype=DT, generator=gen),
                cos_sin_cache=K.rope_cos_sin_cache(inv, max_seq_len).to(DEV),
                slot_mapping=torch.tensor([slot], device=DEV), seq_lens=torch.tensor([ctx], dtype=torch.int32,
                                                                                     device=DEV),
                block_tables=table, max_seq_len=max_seq_len)


@guarded
def b_layer_bs1(ctx: int, gen, phases: bool, prefetch: str = "next", max_seq_len: int = 40960):
    """One Qwen3-0.6B layer for one decode token: y, h2 and the cache within rel err 1e-2 of the reference (one
    launch with the given weight prefetch placement, or five launches; the interpreter runs the five only)."""
    os.environ["TACHYON_LAYER_BS1_PREFETCH"] = prefetch
    max_seq_len = max_seq_len if not SMOKE else 8 * ctx
    case = layer_case(ctx, max_seq_len, gen)
    ref_case = dict(case, kv_cache=case["kv_cache"].clone())
    progs = {"num_programs": 8} if SMOKE else {}
    y, h2 = K.decoder_layer_bs1_triton(**case, phases=phases, **progs)
    yr, h2r = K.decoder_layer_bs1_ref(**ref_case)
    err = max(rel_err(y, yr), rel_err(h2, h2r), rel_err(case["kv_cache"], ref_case["kv_cache"]))
    lw = case["lw"]
    weights = sum(w.numel() for w in (lw.qkv, lw.o, lw.gate_up, lw.down)) * DT.itemsize
    nbytes = weights + 2 * ctx * HKV6 * D6 * DT.itemsize
    flops = 2 * weights / DT.itemsize + 4 * ctx * HQ6 * D6
    form = "5 launches" if phases else f"1 launch, prefetch {prefetch}"
    record("layer_bs1", f"Qwen3-0.6B ctx={ctx} {form}",
           lambda: K.decoder_layer_bs1_triton(**case, phases=phases, **progs), nbytes, flops, err, 1e-2,
           ref_fn=None if phases else lambda: K.decoder_layer_bs1_ref(**ref_case))
    os.environ.pop("TACHYON_LAYER_BS1_PREFETCH")
