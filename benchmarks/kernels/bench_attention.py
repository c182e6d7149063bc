"""Paged-attention benchmarks of run_all.py: store_kv, attention (decode, prefill, mixed; bf16 or e4m3 cache)
against the reference, and the attention launch-config sweep. Rows go to harness.ROWS / harness.SWEEP."""

import importlib
import math
import os

import torch
from harness import BW, DEV, DT, FLOPS, HKV, HQ, PAGE, SMOKE, SWEEP, D, bench, guarded, record
from timing import rel_err

import tachyon.kernels as K


def paged_batch(specs, gen, kv_dtype=None):
    """specs [(cached, new)] -> q, kv_cache, meta (random block placement); the cache in kv_dtype (default DT;
    float8_e4m3fn: rounded as the engine stores it)."""
    blocks = [-(-(c + n) // PAGE) for c, n in specs]
    nb = sum(blocks) + 1
    cache = torch.randn(2, nb, PAGE, HKV, D, device=DEV, dtype=DT, generator=gen)
    if kv_dtype is not None:
        cache = K.quant_fp8.cast_to_cache_ref(cache, kv_dtype)
    perm = torch.randperm(nb, device=DEV, generator=gen).to(torch.int32)
    bt = torch.zeros(len(specs), max(blocks), dtype=torch.int32, device=DEV)
    used = 0
    for b, n in enumerate(blocks):
        bt[b, :n] = perm[used : used + n]
        used += n
    qlens = [n for _, n in specs]
    qsl = torch.tensor([0] + qlens, device=DEV).cumsum(0).to(torch.int32)
    sl = torch.tensor([c + n for c, n in specs], dtype=torch.int32, device=DEV)
    q = torch.randn(sum(qlens), HQ, D, device=DEV, dtype=DT, generator=gen)
    meta = dict(query_start_loc=qsl, seq_lens=sl, block_tables=bt, max_query_len=max(qlens),
                max_seq_len=max(c + n for c, n in specs), scale=1 / math.sqrt(D))
    return q, cache, meta


def attn_cost(specs, kv_bytes: int = 2) -> tuple[float, float]:
    """(bytes, FLOPs) of one attention call over specs [(cached, new)]: the KV read once, q read and out written
    in bf16; 4 FLOPs per head dimension per causal (query, key) pair."""
    kv_tokens = sum(c + n for c, n in specs)
    q_tokens = sum(n for _, n in specs)
    nbytes = kv_tokens * HKV * D * 2 * kv_bytes + q_tokens * HQ * D * 2 * 2
    pairs = sum(n * c + n * (n + 1) / 2 for c, n in specs)  # causal (query, key) pairs
    return nbytes, 4.0 * pairs * HQ * D


@guarded
def b_store_kv(T: int, gen):
    """T tokens' keys and values scattered to random slots (some -1: skipped); must equal the reference exactly."""
    nb = -(-T // PAGE) * 2
    key = torch.randn(T, HKV, D, device=DEV, dtype=DT, generator=gen)
    val = torch.randn(T, HKV, D, device=DEV, dtype=DT, generator=gen)
    slots = torch.randperm(nb * PAGE, device=DEV, generator=gen)[:T]
    slots[:: max(T // 7, 2)] = -1
    c1 = torch.randn(2, nb, PAGE, HKV, D, device=DEV, dtype=DT, generator=gen)
    c2 = c1.clone()
    K.store_kv_triton(key, val, c1, slots)
    K.store_kv_ref(key, val, c2, slots)
    err = 0.0 if torch.equal(c1, c2) else float("inf")
    nbytes = 2 * 2 * T * HKV * D * 2 + T * 8
    record("store_kv", f"T={T}", lambda: K.store_kv_triton(key, val, c1, slots), nbytes, 0, err, 0.0,
           ref_fn=lambda: K.store_kv_ref(key, val, c2, slots))


@guarded
def b_attention(name: str, specs, gen, splits: int = 0, time_ref: bool = True, max_seq_len: int = 0,
                kv_dtype=None, longest_first: bool = False):
    """One row "attention" (or "attention, e4m3 cache" with kv_dtype) named `name`: rel err <= 1e-2 against
    attention_ref; splits 0 = the kernel's own choice (recorded as kv_splits); max_seq_len > 0 overrides the
    batch's (as a CUDA graph passes max_model_len); longest_first dispatches decodes longest first."""
    q, cache, meta = paged_batch(specs, gen, kv_dtype)
    meta["max_seq_len"] = max_seq_len or meta["max_seq_len"]  # a CUDA graph passes max_model_len
    if longest_first:  # a decode batch's programs dispatched longest first (TACHYON_DECODE_ORDER=lpt's order)
        meta["decode_order"] = torch.argsort(-meta["seq_lens"], stable=True).to(torch.int32)
    out = torch.full_like(q, float("nan"))
    K.attention_triton(q, cache, **meta, out=out, num_kv_splits=splits)
    ref = K.attention_ref(q, cache, **meta)
    nbytes, flops = attn_cost(specs, cache.element_size())
    chosen = splits or _auto_splits(specs, meta)
    kernel = "attention" if kv_dtype is None else "attention, e4m3 cache"
    record(kernel, name, lambda: K.attention_triton(q, cache, **meta, out=out, num_kv_splits=splits),
           nbytes, flops, rel_err(out, ref), 1e-2,
           ref_fn=(lambda: K.attention_ref(q, cache, **meta)) if time_ref else None, kv_splits=chosen)


def _auto_splits(specs, meta) -> int:
    """The KV splits the decode kernel picks for this batch; 0 for a batch with any prefill."""
    from tachyon.kernels._triton import sm_count
    from tachyon.kernels.split_kv import choose_kv_splits

    if meta["max_query_len"] != 1:
        return 0
    return choose_kv_splits(len(specs), HKV, meta["max_seq_len"], sm_count(torch.device(DEV)))


@guarded
def sweep_attention(gen):
    """Time alternative launch configurations of the attention kernels (results go to 'sweep')."""
    am = importlib.import_module("tachyon.kernels.attention_config")
    cases = {
        "prefill": ([(0, 4096)], [(128, 64, 8, 2), (128, 64, 8, 3), (128, 128, 8, 2), (64, 64, 4, 2),
                                  (64, 64, 4, 3), (128, 32, 4, 3), (128, 64, 4, 3), (64, 128, 8, 2)]),
        "decode": ([(4095, 1)] * 64, [(64, 4, 2), (64, 4, 3), (128, 4, 2), (32, 4, 3), (64, 8, 2), (128, 8, 3)]),
    }
    key = "fp32" if DT == torch.float32 else "bf16"
    if SMOKE:
        cases = {"prefill": ([(3, 40)], [(32, 32, 4, 1), (16, 16, 4, 1)]), "decode": ([(99, 1)] * 2, [(32, 4, 1)])}
    for kind, (specs, cfgs) in cases.items():
        q, cache, meta = paged_batch(specs, gen)
        nbytes, flops = attn_cost(specs)
        floor = max(nbytes / BW, flops / FLOPS) * 1e6
        table = am.DECODE_CONFIG
        saved = dict(table[key])
        ref = None
        for cfg in cfgs:
            if kind == "prefill":  # the prefill kernel's override knob (its table is by query length)
                os.environ["TACHYON_PREFILL_TILE"] = ":".join(map(str, cfg))
                config = dict(BLOCK_M=cfg[0], BLOCK_N=cfg[1], num_warps=cfg[2], num_stages=cfg[3])
            else:
                table[key] = config = dict(BLOCK_N=cfg[0], num_warps=cfg[1], num_stages=cfg[2])
            try:
                out = K.attention_triton(q, cache, **meta)
                ref = K.attention_ref(q, cache, **meta) if ref is None else ref
                t = bench(lambda: K.attention_triton(q, cache, **meta))  # noqa: B023
                row = dict(kind=kind, config=config, time_us=t, pct_of_floor=100 * floor / t,
                           rel_err=rel_err(out, ref))
            except Exception as e:  # noqa: BLE001 - e.g. out of shared memory for one config
                row = dict(kind=kind, config=config, error=repr(e)[:200])
            SWEEP.append(row)
            print("sweep", row, flush=True)
        table[key] = saved
        os.environ.pop("TACHYON_PREFILL_TILE", None)
