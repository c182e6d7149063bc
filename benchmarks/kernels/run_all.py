"""Check every Tachyon kernel against its reference at real sizes and time it against its floor.

GPU:  cd benchmarks/kernels && python3 run_all.py --out $OUT
CPU:  python3 benchmarks/kernels/run_all.py --smoke   (Triton interpreter, tiny shapes, no timing)

Shapes are Qwen2.5-7B's (Hq 28, Hkv 4, D 128, hidden 3584, intermediate 18944, vocab 152064), bf16.
Floor = max(bytes that must move / 4.25e12 B/s, FLOPs / 778e12 FLOP/s) (H200, BENCHMARKS.md).
Writes kernels.json and kernels.md to --out (default $OUT or ./out); prints the table last.
"""

import argparse
import importlib
import json
import math
import os
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SMOKE = "--smoke" in sys.argv
if SMOKE:
    os.environ["TRITON_INTERPRET"] = "1"
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

import tachyon.kernels as K  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import env as _env  # noqa: E402
from timing import graph_time_us, markdown, rel_err  # noqa: E402

BW, FLOPS = 4.25e12, 778e12
HQ, HKV, D, HIDDEN, INTER, VOCAB, PAGE = 28, 4, 128, 3584, 18944, 152064, 16
if SMOKE:
    HQ, HKV, D, HIDDEN, INTER, VOCAB = 4, 2, 32, 64, 96, 300
DEV = "cpu" if SMOKE else "cuda"
DT = torch.float32 if SMOKE else torch.bfloat16
ROWS: list[dict] = []
PARTIAL: list[Path] = []  # where rows are dumped as they come (survives a timeout)


def bench(fn) -> float:
    """Median time in microseconds (triton.testing.do_bench on GPU, a few host-timed runs on CPU)."""
    if SMOKE:
        fn()
        t = time.perf_counter()
        fn()
        return (time.perf_counter() - t) * 1e6
    import triton.testing

    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e3


def bench_graph(fn, reps: int = 10) -> float | None:
    return graph_time_us(fn, reps, smoke=SMOKE)


def record(kernel: str, shape: str, fn, nbytes: float, flops: float, err: float, tol: float,
           ref_fn=None, **extra) -> None:
    t = bench(fn)
    tg = bench_graph(fn)
    best = min(t, tg) if tg else t
    floor = max(nbytes / BW, flops / FLOPS) * 1e6
    row = dict(kernel=kernel, shape=shape, time_us=t, graph_us=tg, floor_us=floor, pct_of_floor=100 * floor / best,
               bound="flops" if flops / FLOPS > nbytes / BW else "memory", bytes=nbytes, flops=flops,
               rel_err=err, ok=bool(err <= tol), **extra)
    if ref_fn is not None:
        row["ref_time_us"] = bench(ref_fn)
    ROWS.append(row)
    for p in PARTIAL:
        p.write_text(json.dumps(ROWS, indent=1))
    gs = f"{tg:9.1f}" if tg else "        -"
    print(f"{kernel:18s} {shape:34s} {t:9.1f} us graph {gs} us floor {floor:8.1f} us err {err:.2e}", flush=True)


def guarded(fn):
    def run(*a, **k):
        try:
            fn(*a, **k)
        except Exception as e:  # keep going: one broken kernel must not hide the others
            traceback.print_exc()
            ROWS.append(dict(kernel=fn.__name__, shape=str(a), error=repr(e)[:500], ok=False))
    return run


# ------------------------------------------------------------------------------------ helpers


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
    kv_tokens = sum(c + n for c, n in specs)
    q_tokens = sum(n for _, n in specs)
    nbytes = kv_tokens * HKV * D * 2 * kv_bytes + q_tokens * HQ * D * 2 * 2
    pairs = sum(n * c + n * (n + 1) / 2 for c, n in specs)  # causal (query, key) pairs
    return nbytes, 4.0 * pairs * HQ * D


# ------------------------------------------------------------------------------------ kernels


@guarded
def b_store_kv(T: int, gen):
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
    from tachyon.kernels._triton import sm_count
    from tachyon.kernels.split_kv import choose_kv_splits

    if meta["max_query_len"] != 1:
        return 0
    return choose_kv_splits(len(specs), HKV, meta["max_seq_len"], sm_count(torch.device(DEV)))


@guarded
def b_rmsnorm(T: int, gen):
    x = torch.randn(T, HIDDEN, device=DEV, dtype=DT, generator=gen)
    r = torch.randn(T, HIDDEN, device=DEV, dtype=DT, generator=gen)
    w = 1 + 0.1 * torch.randn(HIDDEN, device=DEV, dtype=DT, generator=gen)
    out, h = K.rmsnorm_triton(x, w, 1e-6, r)
    ro, rh = K.rmsnorm_ref(x, w, 1e-6, r)
    err = max(rel_err(out, ro), rel_err(h, rh))
    record("rmsnorm+residual", f"T={T} H={HIDDEN}", lambda: K.rmsnorm_triton(x, w, 1e-6, r),
           4 * T * HIDDEN * 2, 0, err, 1e-2, ref_fn=lambda: K.rmsnorm_ref(x, w, 1e-6, r))


@guarded
def b_rotary(T: int, gen):
    inv = 1.0 / (1e6 ** (torch.arange(0, D, 2, dtype=torch.float32) / D))
    cache = K.rope_cos_sin_cache(inv, 32768).to(DEV)
    pos = torch.randint(0, 32768, (T,), device=DEV, generator=gen)
    q = torch.randn(T, HQ, D, device=DEV, dtype=DT, generator=gen)
    k = torch.randn(T, HKV, D, device=DEV, dtype=DT, generator=gen)
    qt, kt = K.rotary_triton(q.clone(), k.clone(), pos, cache)
    qr, kr = K.rotary_ref(q.clone(), k.clone(), pos, cache)
    err = max(rel_err(qt, qr), rel_err(kt, kr))
    q2, k2 = q.clone(), k.clone()
    nbytes = 2 * T * (HQ + HKV) * D * 2 + T * D * 4 + T * 8
    record("rotary", f"T={T}", lambda: K.rotary_triton(q2, k2, pos, cache), nbytes, 0, err, 1e-2,
           ref_fn=lambda: K.rotary_ref(q2, k2, pos, cache))


@guarded
def b_silu(T: int, gen):
    x = torch.randn(T, 2 * INTER, device=DEV, dtype=DT, generator=gen)
    err = rel_err(K.silu_and_mul_triton(x), K.silu_and_mul_ref(x))
    record("silu_and_mul", f"T={T} I={INTER}", lambda: K.silu_and_mul_triton(x), 3 * T * INTER * 2, 0, err,
           1e-2, ref_fn=lambda: K.silu_and_mul_ref(x))


@guarded
def b_penalties(B: int, gen):
    """A batch of penalised rows: each row's counts and prompt flags (~1% of the vocabulary) in its own slot."""
    logits = torch.randn(B, VOCAB, device=DEV, generator=gen) * 3
    hits = torch.rand(B, VOCAB, device=DEV, generator=gen) < 0.01
    counts = (torch.randint(1, 4, (B, VOCAB), device=DEV, generator=gen) * hits).to(torch.int32)
    seen = torch.rand(B, VOCAB, device=DEV, generator=gen) < 0.01
    rows = torch.arange(B, device=DEV)
    params = torch.tensor([[1.2, 0.3, 0.4]], device=DEV).expand(B, 3).contiguous()
    a, b = logits.clone(), logits.clone()
    K.apply_penalties_triton(a, rows, rows, counts, seen, params)
    K.apply_penalties_ref(b, rows, rows, counts, seen, params)
    record("penalties", f"B={B} V={VOCAB}", lambda: K.apply_penalties_triton(logits, rows, rows, counts, seen, params),
           B * VOCAB * (4 + 4 + 4 + 1), 0, rel_err(a, b), 1e-4,
           ref_fn=lambda: K.apply_penalties_ref(logits, rows, rows, counts, seen, params))


def sample_params(B: int, T: float, k: int, p: float, mp: float, seed0: int = 0) -> dict:
    return dict(temperature=torch.full((B,), T, device=DEV), top_k=torch.full((B,), k, dtype=torch.int32,
                device=DEV), top_p=torch.full((B,), p, device=DEV), min_p=torch.full((B,), mp, device=DEV),
                seeds=torch.arange(seed0, seed0 + B, device=DEV), steps=torch.full((B,), 3, device=DEV))


def torch_sort_sampler(logits, prm):
    """Vectorised full-sort baseline (what a plain-torch GPU sampler does) for comparison."""
    s = logits / prm["temperature"].clamp_min(1e-5)[:, None]
    vals, idx = s.sort(dim=-1, descending=True)
    probs = vals.softmax(-1)
    keep = (probs.cumsum(-1) - probs) < prm["top_p"][:, None]
    probs = probs.masked_fill(~keep, 0)
    return idx.gather(1, torch.multinomial(probs, 1)).squeeze(1)


@guarded
def b_sample(B: int, mode: str, gen):
    cfg = {"greedy": (0.0, 0, 1.0, 0.0), "temperature": (0.8, 0, 1.0, 0.0), "top_p0.9": (0.7, 0, 0.9, 0.0),
           "top_k50": (1.0, 50, 1.0, 0.0), "k50_p0.9_minp0.05": (1.0, 50, 0.9, 0.05)}[mode]
    logits = torch.randn(B, VOCAB, device=DEV, generator=gen) * 3
    prm = sample_params(B, *cfg)
    tok = K.sample_triton(logits, **prm)
    if mode == "greedy":
        err = 0.0 if torch.equal(tok, logits.argmax(-1)) else 1.0
    else:  # the drawn token must lie in the kept set of its row (checked with the full-sort reference)
        err = float(not bool(_in_kept_set(logits, tok, *cfg).all()))
    record("sample", f"B={B} V={VOCAB} {mode}", lambda: K.sample_triton(logits, **prm), B * VOCAB * 4, 0,
           err, 0.0, torch_sort_baseline_us=bench(lambda: torch_sort_sampler(logits, prm)))


def _in_kept_set(logits, tok, T, k, p, mp) -> torch.Tensor:
    s = logits.double() / T
    vals, idx = s.sort(dim=-1, descending=True)
    keep = torch.ones_like(vals, dtype=torch.bool)
    if 0 < k < vals.shape[1]:
        keep[:, k:] = False
    probs = vals.masked_fill(~keep, -math.inf).softmax(-1)
    if p < 1:
        keep &= (probs.cumsum(-1) - probs) < p
    if mp > 0:
        keep &= vals >= vals[:, :1] + math.log(mp)
    rank = (idx == tok[:, None]).int().argmax(-1)
    return keep.gather(1, rank[:, None]).squeeze(1)


@guarded
def b_sample_distribution(gen):
    """Many draws of one small-vocab row per config: frequencies against the exact distribution."""
    V, n = 32, 20000 if not SMOKE else 50
    base = torch.randn(V, device=DEV, generator=gen) * 1.5
    worst = 0.0
    for T, k, p, mp in [(0.8, 0, 1.0, 0.0), (1.0, 5, 1.0, 0.0), (1.0, 0, 0.7, 0.0), (1.2, 8, 0.8, 0.05)]:
        tok = K.sample_triton(base.expand(n, V).contiguous(), **sample_params(n, T, k, p, mp, seed0=77))
        s = base.double().cpu() / T
        vals, idx = s.sort(descending=True)
        keep = torch.ones(V, dtype=torch.bool)
        if 0 < k < V:
            keep[k:] = False
        probs = vals.masked_fill(~keep, -math.inf).softmax(0)
        if p < 1:
            keep &= (probs.cumsum(0) - probs) < p
        if mp > 0:
            keep &= probs >= mp * probs[0]
        exp = torch.zeros(V, dtype=torch.float64)
        exp[idx] = vals.masked_fill(~keep, -math.inf).softmax(0)
        freq = torch.bincount(tok.cpu(), minlength=V).double() / n
        worst = max(worst, 0.5 * (freq - exp).abs().sum().item() + (freq[exp == 0].sum().item() > 0))
    ROWS.append(dict(kernel="sample_distribution", shape=f"V={V} n={n} x4 configs", tv_distance=worst,
                     ok=worst < (0.04 if not SMOKE else 0.5)))
    print(f"sample distribution: worst total-variation distance {worst:.4f}", flush=True)


SWEEP: list[dict] = []


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


@guarded
def sweep_sampling(gen):
    """Search ways per pass, and candidates on/off (CANDIDATES=1 forces whole-row searches)."""
    sm = sys.modules["tachyon.kernels.sampling"]
    saved = (sm.SEARCH_WAYS, sm.CANDIDATES)
    cases = {"B=1 top_p0.9 T0.7": (1, (0.7, 0, 0.9, 0.0)), "B=1 top_k50": (1, (1.0, 50, 1.0, 0.0)),
             "B=8 k50_p0.9_minp0.05": (8, (1.0, 50, 0.9, 0.05))}
    for name, (B, cfg) in cases.items():
        logits = torch.randn(B, VOCAB, device=DEV, generator=gen) * 3
        prm = sample_params(B, *cfg)
        for ways, cand in [(2, 4096), (4, 4096), (8, 4096), (4, 1)]:
            sm.SEARCH_WAYS, sm.CANDIDATES = ways, cand
            tok = K.sample_triton(logits, **prm)
            ok = bool(_in_kept_set(logits, tok, *cfg).all())
            row = dict(kind="sample " + name, config=dict(ways=ways, candidates=cand), ok=ok,
                       time_us=bench(lambda: K.sample_triton(logits, **prm)))  # noqa: B023
            SWEEP.append(row)
            print("sweep", row, flush=True)
    sm.SEARCH_WAYS, sm.CANDIDATES = saved


# ------------------------------------------------------------------------------------ main


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--smoke", action="store_true", help="CPU: Triton interpreter, tiny shapes")
    ap.add_argument("--only", default="", help="comma-separated kernel families to run (default: all), e.g. penalties")
    args = ap.parse_args()
    if not SMOKE and not torch.cuda.is_available():
        sys.exit("no CUDA device (use --smoke on CPU)")
    gen = torch.Generator(device=DEV).manual_seed(0)
    t0 = time.time()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    PARTIAL.append(out / "kernels_partial.json")
    only = set(filter(None, args.only.split(",")))
    if only:
        _run_only(only, gen)
    else:
        _run_all(gen)
    result = dict(env=_env(ROOT), smoke=SMOKE, bandwidth_Bps=BW, flops_per_s=FLOPS, wall_s=time.time() - t0, rows=ROWS,
                  sweep=SWEEP)
    (out / "kernels.json").write_text(json.dumps(result, indent=1))
    table = markdown(ROWS)
    (out / "kernels.md").write_text(table)
    print(json.dumps(result["env"]))
    print(table)
    bad = [r for r in ROWS if not r.get("ok")]
    print(f"{len(ROWS) - len(bad)}/{len(ROWS)} ok; wall {time.time() - t0:.0f}s")


def _run_only(only: set[str], gen) -> None:
    known = {"penalties": lambda: [b_penalties(B, gen) for B in ([1, 64, 256] if not SMOKE else [2])]}
    unknown = only - set(known)
    if unknown:
        sys.exit(f"--only: unknown kernel families {sorted(unknown)}; known: {sorted(known)}")
    for name in sorted(only):
        known[name]()


def _run_all(gen) -> None:
    ctxs = [512, 4096] if not SMOKE else [40, 130]
    batches = [1, 64, 256] if not SMOKE else [1, 3]
    for T in ([256, 4096] if not SMOKE else [5]):
        b_store_kv(T, gen)
    for B in batches:
        for ctx in ctxs:
            b_attention(f"decode B={B} ctx={ctx}", [(ctx - 1, 1)] * B, gen, time_ref=B <= 64)
    if not SMOKE:
        b_attention("decode B=1 ctx=4096 no split", [(4095, 1)], gen, splits=1, time_ref=False)
        b_attention("decode B=1 ctx=4096 max_seq_len=32768", [(4095, 1)], gen, time_ref=False, max_seq_len=32768)
        b_attention("decode B=64 ctx=1024 max_seq_len=32768", [(1023, 1)] * 64, gen, time_ref=False,
                    max_seq_len=32768)
        b_attention("decode B=8 ctx=2048..4096", [(2047 + 256 * i, 1) for i in range(8)], gen)
        spread = [(200 + (i * 677) % 1400, 1) for i in range(160)]  # a flat step's decodes: contexts 200-1,599
        b_attention("decode B=160 ctx=200..1600", spread, gen, time_ref=False)
        b_attention("decode B=160 ctx=200..1600 longest first", spread, gen, time_ref=False, longest_first=True)
        b_attention("prefill 1x4096", [(0, 4096)], gen)
        b_attention("prefill 4x1024 after 1024 cached", [(1024, 1024)] * 4, gen)
        b_attention("mixed 2048 chunk + 64 decodes", [(2048, 2048)] + [(1023, 1)] * 64, gen, time_ref=False)
    else:
        b_attention("prefill smoke", [(0, 37), (20, 5), (9, 1)], gen)
    for T in ([1, 256, 4096] if not SMOKE else [3]):
        b_rmsnorm(T, gen)
        b_rotary(T, gen)
        b_silu(T, gen)
    for B in ([1, 8, 256] if not SMOKE else [2]):
        for mode in ["greedy", "temperature", "top_p0.9", "top_k50", "k50_p0.9_minp0.05"]:
            b_sample(B, mode, gen)
    for B in ([1, 64, 256] if not SMOKE else [2]):
        b_penalties(B, gen)
    b_sample_distribution(gen)
    sweep_attention(gen)
    sweep_sampling(gen)


if __name__ == "__main__":
    main()
