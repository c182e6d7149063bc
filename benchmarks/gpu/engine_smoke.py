"""GPU smoke + speed run of the Tachyon engine on dummy-weight shapes, in one process.

Usage (on the GPU machine, repo root): python3 benchmarks/gpu/engine_smoke.py --out $OUT [--shapes ...]
Prints a table; writes engine_smoke.json under --out.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from tachyon import LLM, SamplingParams  # noqa: E402

WL = Path(__file__).resolve().parents[2] / "tachyon" / "bench" / "workloads"


def load_workload(name: str) -> list[dict]:
    return json.loads((WL / f"{name}.json").read_text())["requests"]


def run_workload(llm: LLM, name: str, limit: int | None = None) -> dict:
    reqs = load_workload(name)[:limit]
    temp, top_p = (0.7, 0.9) if name == "seed8" else (0.0, 1.0)
    params = [SamplingParams(max_tokens=r["max_tokens"], temperature=temp, top_p=top_p, seed=i, ignore_eos=True)
              for i, r in enumerate(reqs)]
    prompts = [r["prompt_token_ids"] for r in reqs]
    # warm-up (excluded)
    llm.generate(prompts[:2], SamplingParams(max_tokens=8, ignore_eos=True), use_tqdm=False)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    outs = llm.generate(prompts, params, use_tqdm=False)
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    n_out = sum(len(o.outputs[0].token_ids) for o in outs)
    assert n_out == sum(r["max_tokens"] for r in reqs), "token count mismatch"
    ttft = [o.metrics.first_token_time - o.metrics.arrival_time for o in outs]
    tpot = [(o.metrics.finished_time - o.metrics.first_token_time) / max(1, len(o.outputs[0].token_ids) - 1)
            for o in outs]
    return dict(workload=name, requests=len(reqs), output_tokens=n_out, seconds=dt, output_tok_s=n_out / dt,
                ttft_mean_ms=1e3 * sum(ttft) / len(ttft), tpot_mean_ms=1e3 * sum(tpot) / len(tpot),
                peak_mem_gib=torch.cuda.max_memory_allocated() / 2**30)


def pdl_check(shape: str, dtype: str = "bfloat16") -> dict:
    """Race check of the reads above the PDL wait (kernels/_triton.py pdl_wait): greedy tokens and their
    log-probs with PDL on (kernels overlapping their predecessors) must equal, bit for bit, those of an engine
    built with TACHYON_PDL=0: the same kernels do the same arithmetic either way, so a kernel reading before
    its wait something the running step writes would show as a difference. 4 seed8 prompts, one at a time
    (batch-1 graphs) and together (B=4)."""
    prompts = [p["prompt_token_ids"] for p in load_workload("seed8")[:4]]
    sp = SamplingParams(temperature=0, max_tokens=32, ignore_eos=True, logprobs=1)
    runs = {}
    for pdl in ("1", "0"):
        os.environ["TACHYON_PDL"] = pdl
        llm = LLM(shape, load_format="dummy", dtype=dtype, max_model_len=4096, max_num_seqs=16)
        outs = [o for p in prompts for o in llm.generate([p], sp, use_tqdm=False)]
        outs += llm.generate(prompts, sp, use_tqdm=False)
        runs[pdl] = [(list(o.outputs[0].token_ids),
                      [lp[t].logprob for t, lp in zip(o.outputs[0].token_ids, o.outputs[0].logprobs)]) for o in outs]
        del llm
        gc.collect()
        torch.cuda.empty_cache()
    os.environ.pop("TACHYON_PDL")
    same = [a == b for a, b in zip(runs["1"], runs["0"])]
    return dict(shape=shape, dtype=dtype, check="pdl_on_vs_off", identical=all(same),
                identical_batch1=same[:4], identical_batch4=same[4:])


def parity(shape: str, dtype: str = "bfloat16", single: bool = False, quantization: str | None = None,
           kv_cache_dtype: str = "auto") -> dict:
    """Greedy tokens of the GPU engine against the torch reference path (eager) on 4 seed8 prompts, decoded
    together (B=4) or, with `single`, one request at a time (the batch-1 decode graphs); both engines built
    with `quantization` (FP8: the reference dequantizes, exact fp32 accumulation) and `kv_cache_dtype`."""
    prompts = [p["prompt_token_ids"] for p in load_workload("seed8")[:4]]
    sp = SamplingParams(temperature=0, max_tokens=32, ignore_eos=True)
    fast = LLM(shape, load_format="dummy", dtype=dtype, max_model_len=4096, max_num_seqs=16, quantization=quantization,
               kv_cache_dtype=kv_cache_dtype)
    groups = [[p] for p in prompts] if single else [prompts]
    a = [o.outputs[0].token_ids for g in groups for o in fast.generate(g, sp, use_tqdm=False)]
    del fast
    gc.collect()
    torch.cuda.empty_cache()
    os.environ["TACHYON_FORCE_REF"] = "1"
    ref = LLM(shape, load_format="dummy", dtype=dtype, max_model_len=4096, max_num_seqs=16, enforce_eager=True,
              quantization=quantization, kv_cache_dtype=kv_cache_dtype)
    ref_out = ref.generate(prompts, sp.clone(logprobs=20), use_tqdm=False)
    b = [o.outputs[0].token_ids for o in ref_out]
    del ref
    gc.collect()
    os.environ.pop("TACHYON_FORCE_REF")
    torch.cuda.empty_cache()
    first_div = [next((i for i, (x, y) in enumerate(zip(p, q)) if x != y), None) for p, q in zip(a, b)]
    # at a divergence, the reference's top-2 log-prob gap: a bf16 near-tie if it is tiny
    gaps = []
    for k, i in enumerate(first_div):
        if i is None:
            gaps.append(None)
            continue
        lps = ref_out[k].outputs[0].logprobs[i]
        ranked = sorted(lps, key=lambda t: -lps[t].logprob)
        top = [lps[t].logprob for t in ranked[:2]]
        rank = ranked.index(a[k][i]) + 1 if a[k][i] in lps else None  # the fast token among the ref's top 20
        gaps.append(dict(pos=i, top2_logprob_gap=top[0] - top[1], fast_token_in_ref_top2=rank is not None and rank <= 2,
                         fast_token_ref_rank=rank,
                         fast_token_ref_gap=None if rank is None else top[0] - lps[a[k][i]].logprob))
    return dict(shape=shape, dtype=dtype, quantization=quantization, kv_cache_dtype=kv_cache_dtype,
                batch=1 if single else len(prompts),
                identical=a == b, first_divergence=first_div, divergence_gaps=gaps)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="out")
    ap.add_argument("--shapes", default="qwen3-0.6b,qwen2.5-7b")
    ap.add_argument("--workloads", default="bs1,seed8,nano256")
    ap.add_argument("--parity", action="store_true")
    ap.add_argument("--parity-dtypes", default="bfloat16")
    ap.add_argument("--parity-single", action="store_true",
                    help="parity prompts one at a time (batch-1 graphs)")
    ap.add_argument("--pdl-check", action="store_true", help="greedy tokens with PDL on == off, bit for bit")
    ap.add_argument("--max-num-seqs", type=int, default=512)
    ap.add_argument("--nano-limit", type=int, default=None)
    ap.add_argument("--no-overlap", action="store_true")
    ap.add_argument("--max-num-batched-tokens", type=int, default=8192)
    ap.add_argument("--prefill-graph-max-tokens", type=int, default=512)
    ap.add_argument("--tag", default="", help="suffix of the result file name")
    ap.add_argument("--quantization", default=None, choices=["fp8"], help="the engine's quantization argument")
    ap.add_argument("--kv-cache-dtype", default="auto", choices=["auto", "fp8"], help="the engine's kv_cache_dtype")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, cuda=torch.version.cuda,
               git=os.environ.get("GIT_SHA") or subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True,
                                                               text=True).stdout.strip())
    results = dict(env=env, runs=[], parity=[])
    for shape in args.shapes.split(","):
        if args.pdl_check:
            results.setdefault("pdl_check", []).append(pdl_check(shape))
            print(results["pdl_check"][-1], flush=True)
        if args.parity:
            for dt in args.parity_dtypes.split(","):
                results["parity"].append(parity(shape, dt, args.parity_single, args.quantization,
                                                args.kv_cache_dtype))
                print(results["parity"][-1], flush=True)
        t0 = time.perf_counter()
        llm = LLM(shape, load_format="dummy", max_model_len=4096, max_num_batched_tokens=args.max_num_batched_tokens,
                  max_num_seqs=args.max_num_seqs, overlap_scheduling=not args.no_overlap,
                  prefill_graph_max_tokens=args.prefill_graph_max_tokens, quantization=args.quantization,
                  kv_cache_dtype=args.kv_cache_dtype)
        startup = time.perf_counter() - t0
        prof = dict(getattr(llm.engine.runner, "profile", {}))
        graphs = llm.engine.runner.graphs
        prof["graphs"] = sorted(graphs.graphs) if graphs is not None else None
        print(f"{shape}: startup {startup:.1f} s, blocks {llm.engine.pool.num_blocks}, profile {prof}", flush=True)
        for wl in args.workloads.split(","):
            r = run_workload(llm, wl, args.nano_limit if wl == "nano256" else None)
            r.update(shape=shape, startup_s=startup, overlap=not args.no_overlap, quantization=args.quantization,
                     kv_cache_dtype=args.kv_cache_dtype,
                     max_num_batched_tokens=args.max_num_batched_tokens,
                     prefill_graph_max_tokens=args.prefill_graph_max_tokens)
            if wl == "bs1":
                spec = llm.engine.spec
                weight_bytes = (spec.num_params() - spec.vocab_size * spec.hidden_size
                                * (0 if spec.tie_word_embeddings else 1)) * 2
                if args.quantization is None:  # (FP8 layers read about half; not computed here)
                    r["weight_read_gb_s"] = weight_bytes / (r["tpot_mean_ms"] / 1e3) / 1e9
            results["runs"].append(r)
            print(json.dumps(r), flush=True)
            name = f"engine_smoke_{args.shapes.replace(',', '_')}{'_sync' if args.no_overlap else ''}{args.tag}.json"
            (out / name).write_text(json.dumps(results, indent=1))
        del llm
        gc.collect()
        torch.cuda.empty_cache()
    print("\nshape        workload   tok/s     TTFT ms  TPOT ms")
    for r in results["runs"]:
        print(f"{r['shape']:12s} {r['workload']:9s} {r['output_tok_s']:9.1f} {r['ttft_mean_ms']:8.1f} "
              f"{r['tpot_mean_ms']:7.2f}")


if __name__ == "__main__":
    main()
