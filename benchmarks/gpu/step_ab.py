"""A/B of whole decode-step graphs: one engine per process, then the bs1 / bs8 decode graphs re-captured
under each variant and replay-timed at a 512-token context. A variant sets environment knobs (PDL) and
may override the warm-up's fusion choices (every RMSNorm / SiLU prologue fused into its GEMV, or none).

Usage (GPU machine, repo root): python3 benchmarks/gpu/step_ab.py --out $OUT --shapes qwen2.5-7b \
    [--variants off,on,gemv_off,auto,fuse_all,fuse_none]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from benchmarks.gpu.profile_step import replay_ms  # noqa: E402
from tachyon import LLM  # noqa: E402

BASE = {"TACHYON_PDL": "1", "TACHYON_PDL_GEMV": "auto", "TACHYON_L2_PREFETCH_MB": "0"}
# name -> (environment over BASE, fusion override: None = the warm-up's choices, "all", "none", or one
# prologue kind ("silu", "rmsnorm") fused and the other not)
VARIANTS = {
    "off": ({"TACHYON_PDL": "0"}, None),
    "on": ({"TACHYON_PDL_GEMV": "start"}, None),
    "gemv_off": ({"TACHYON_PDL_GEMV": "off"}, None),
    "auto": ({}, None),
    "fuse_all": ({}, "all"),
    "fuse_none": ({}, "none"),
    "fuse_silu": ({}, "silu"),
    "fuse_norm": ({}, "rmsnorm"),
    # per-layer L2 prefetch of o_proj / MLP weights on a side stream during attention (MB per layer)
    **{f"l2pf{mb}": ({"TACHYON_L2_PREFETCH_MB": str(mb)}, None) for mb in (0, 8, 16, 24, 32, 48, 64)},
}


# short names of the knobs a composite variant ("maxmb=32+l2pf=16") sets
KNOBS = {"maxmb": "TACHYON_PDL_GEMV_MAX_MB", "pdlg": "TACHYON_PDL_GEMV", "pdl": "TACHYON_PDL",
         "l2pf": "TACHYON_L2_PREFETCH_MB", "trigmb": "TACHYON_PDL_GEMV_TRIGGER_MAX_MB",
         "fda": "TACHYON_FUSED_DECODE_ATTN", "strig": "TACHYON_PDL_SMALL_TRIGGER_MAX_MB",
         "early": "TACHYON_DECODE_EARLY_EXIT", "merge": "TACHYON_DECODE_MERGE",
         "dtile": "TACHYON_DECODE_TILE", "ftile": "TACHYON_DECODE_FUSED_TILE", "lastwave": "TACHYON_PDL_GEMV_LAST_WAVE",
         "dalign": "TACHYON_DECODE_SPLIT_ALIGN", "fearly": "TACHYON_DECODE_FUSED_EARLY_TILE",
         "ugraph": "TACHYON_UNFILTERED_GRAPHS", "fq": "TACHYON_FP8_FUSED_QUANT",
         "swaves": "TACHYON_DECODE_SPLIT_WAVES", "layer": "TACHYON_LAYER_BS1", "lwarps": "TACHYON_LAYER_BS1_WARPS",
         "lpf": "TACHYON_LAYER_BS1_PREFETCH", "ltile": "TACHYON_LAYER_BS1_EARLY_TILE",
         "pwarps": "TACHYON_LAYER_BS1_PHASE_WARPS", "gprog": "TACHYON_LAYER_BS1_GEMV_PROGRAMS"}


def variant(name: str) -> tuple[dict, str | None, dict]:
    """(environment, fusion override, config overrides) of VARIANTS[name], or of a composite of parts
    joined by "+": knob=value (short names in KNOBS), or <kind>.<layer>=<config> overriding the warm-up's
    choice for every Linear attribute named <layer> (kind gemv: batch 1, small: 2..8 rows, fused: batch 1 with
    the layer's prologue op in the GEMV, glu: batch 1 gate|up with the activation in its epilogue; config
    colon-separated ints, or "cublas" / for fused and glu "none"), or
    races=<R> (the sampler's FAST_RACES), e.g.
    "maxmb=32+small.qkv_proj=1:64:128:4:4:4"."""
    if name in VARIANTS:
        return (*VARIANTS[name], {})
    env, overrides = {}, {}
    try:
        for part in name.split("+"):
            key, val = part.split("=")
            if key == "races":  # the sampler's rejection fast path (kernels/sampling.py FAST_RACES)
                overrides[("sampler", "FAST_RACES")] = int(val)
            elif "." in key:
                kind, layer = key.split(".")
                assert kind in ("gemv", "small", "fused", "glu")
                overrides[(kind, layer)] = None if val in ("cublas", "none") else tuple(int(v) for v in val.split(":"))
            else:
                env[KNOBS[key]] = val
    except (KeyError, ValueError, AssertionError):
        raise SystemExit(f"unknown variant {name!r}: one of {sorted(VARIANTS)} or knob=value[+...] over "
                         f"{sorted(KNOBS)} / gemv|small.<layer>=<config>") from None
    return env, None, overrides


def set_configs(model: torch.nn.Module, overrides: dict, saved: dict) -> None:
    """Apply `overrides` {(kind, layer name): config} after restoring every Linear's warm-up choice (and
    the sampler's FAST_RACES)."""
    from tachyon.kernels import sampling
    from tachyon.models.layers import Linear

    races = saved.setdefault("FAST_RACES", sampling.FAST_RACES)
    sampling.FAST_RACES = overrides.get(("sampler", "FAST_RACES"), races)
    for parent in model.modules():
        for attr, m in parent.named_children():
            if not isinstance(m, Linear):
                continue
            gemv, small = saved.setdefault(("cfg", id(m)), (m.gemv_config, m.small_config))
            m.gemv_config = overrides.get(("gemv", attr), gemv)
            m.small_config = overrides.get(("small", attr), small)
            if ("fused", attr) in overrides:  # otherwise set_fusion (called first) decides
                m.fused_config = overrides[("fused", attr)]
            glu = saved.setdefault(("glu", id(m)), m.epilogue_config)
            m.epilogue_config = overrides.get(("glu", attr), glu)


def set_fusion(model: torch.nn.Module, mode: str | None, saved: dict) -> None:
    """Override (or, mode None, restore) every prologue Linear's fused config; `saved` keeps the originals."""
    from tachyon.models.layers import Linear

    for m in model.modules():
        if isinstance(m, Linear) and m.prologue is not None:
            saved.setdefault(id(m), m.fused_config)
            if mode is None:
                m.fused_config = saved[id(m)]
            elif mode == "none" or (mode != "all" and m.prologue != mode):
                m.fused_config = None
            else:
                m.fused_config = saved[id(m)] or m.gemv_config or (4, 1024, 4, 1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="out")
    ap.add_argument("--shapes", default="qwen3-0.6b", help="one engine per process: one shape per run")
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--max-model-len", type=int, default=4096, help="sizes the graphs' split-KV grids")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--variants", default="off,on,gemv_off,auto")
    ap.add_argument("--large", default="", help="also these batch sizes (e.g. 64,256), greedy, each row its own "
                                                 "KV blocks")
    args = ap.parse_args()
    large = [int(b) for b in args.large.split(",") if b]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for shape in args.shapes.split(","):
        llm = LLM(shape, load_format="dummy", max_model_len=args.max_model_len, max_num_batched_tokens=8192,
                  max_num_seqs=max([8] + large))
        runner = llm.engine.runner
        blocks = -(-args.context // runner.block_size)
        res = {"shape": shape, "context": args.context, "max_model_len": args.max_model_len}
        saved: dict = {}
        for rnd in range(args.rounds):  # rounds interleave the variants (clock / thermal drift)
            for name in args.variants.split(","):
                env, fusion, overrides = variant(name)
                for knob in KNOBS.values():  # unset knobs take the code's defaults
                    os.environ.pop(knob, None)
                os.environ.update(BASE | env)
                set_fusion(runner.model, fusion, saved)
                set_configs(runner.model, overrides, saved)
                with torch.inference_mode():
                    g = runner._graph_runner()
                    g.capture(sorted({1, 8, *large}))
                    g.seq_lens.fill_(args.context)
                    g.block_tables[:, :blocks] = torch.arange(blocks, dtype=torch.int32, device=g.device)
                    g.slots.fill_(-1)
                    r = {"bs1": replay_ms(g, 1, 100), "bs8_greedy": replay_ms(g, 8, 100)}
                    g.temperature[:8] = 0.7
                    g.top_p[:8] = 0.9
                    r["bs8_top_p"] = replay_ms(g, 8, 100)
                    g.temperature.zero_()
                    g.top_p.fill_(1.0)
                    for b in large:
                        g.block_tables[:b, :blocks] = torch.arange(b * blocks, dtype=torch.int32,
                                                                   device=g.device).view(b, blocks)
                        r[f"bs{b}_greedy"] = replay_ms(g, b, 20)
                    g.release()
                res.setdefault(name, []).append(r)
                print(f"{shape} round {rnd} {name:10s} " + " ".join(f"{k} {v:.3f}" for k, v in r.items()), flush=True)
        set_fusion(runner.model, None, saved)
        set_configs(runner.model, {}, saved)
        results.append(res)
        (out / "step_ab.json").write_text(json.dumps(results, indent=1))
        del llm, runner
        torch.cuda.empty_cache()
    os.environ.update(BASE)


if __name__ == "__main__":
    main()
