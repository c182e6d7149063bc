"""Command implementations behind `tachyon bench ...` and `tachyon plan` (parsed args in, exit code out)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from tachyon.bench.schema import BenchResult, load_result, save_result


def parse_kv(items: list[str]) -> dict:
    out = {}
    for item in items:
        k, sep, v = item.partition("=")
        if not sep:
            raise SystemExit(f"--engine-arg needs KEY=VALUE, got {item!r}")
        try:
            out[k] = json.loads(v)
        except json.JSONDecodeError:
            out[k] = v
    return out


def _finish(res: BenchResult, args) -> Path:
    out = Path(args.output or f"out/bench/{res.kind}-{time.strftime('%Y%m%d-%H%M%S')}.json")
    path = save_result(res, out)
    print(f"result: {path} (+ {path.stem}.requests.jsonl)")
    if args.report_dir:
        from tachyon.bench.report import write_reports

        files = write_reports(res, args.report_dir, stem=path.stem)
        print(f"reports: {files['markdown']}, {files['html']}")
    for w in res.warnings:
        print(f"WARNING: {w}", file=sys.stderr)
    return path


def offline(args) -> int:
    from tachyon.bench.backends import BackendOptions
    from tachyon.bench.offline import run_offline
    from tachyon.bench.report_md import md_table
    from tachyon.bench.tables import speedup_table
    from tachyon.bench.workloads import load_workload

    wl = load_workload(args.workload)
    if args.clamp_vocab:
        wl = wl.clamp_vocab(args.clamp_vocab)
    if args.num_requests or args.max_tokens:
        wl = wl.truncated(args.num_requests, args.max_tokens)
    opts = BackendOptions(model=args.model, dummy=args.dummy, dtype=args.dtype, device=args.device,
                          seed=args.seed, hf_batch_size=args.hf_batch_size,
                          engine_args=parse_kv(args.engine_arg))
    backends = [b.strip() for b in args.backend.split(",") if b.strip()]
    if args.repeats < 1:
        raise SystemExit(f"--repeats must be at least 1, got {args.repeats}")
    if args.warmup_max_tokens is not None and args.warmup_max_tokens < 1:
        raise SystemExit(f"--warmup-max-tokens must be at least 1, got {args.warmup_max_tokens}")
    res = run_offline(backends, opts, wl, warmup=not args.no_warmup, repeats=args.repeats,
                      warmup_max_tokens=args.warmup_max_tokens, isolate=args.isolate)
    print(md_table(*speedup_table(res)))
    _finish(res, args)
    return 0 if not res.warnings else 2


def _requests(args):
    from tachyon.bench import datasets as D

    tok = None
    if args.tokenizer:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(args.tokenizer)
    vocab = args.vocab_size or 32000
    if args.dataset == "random":
        return D.random_requests(args.num_prompts, args.input_len, args.output_len, args.len_dist,
                                 args.len_ratio, vocab, args.seed)
    if args.dataset == "shared-prefix":
        return D.shared_prefix_requests(args.num_prompts, args.num_groups, args.prefix_len, args.input_len,
                                        args.output_len, vocab, args.seed)
    if not args.dataset_path:
        raise SystemExit(f"--dataset {args.dataset} needs --dataset-path")
    if args.dataset == "prompts":
        return D.prompts_file_requests(args.dataset_path, args.num_prompts, args.output_len, tok)
    if args.dataset == "sharegpt":
        return D.sharegpt_requests(args.dataset_path, args.num_prompts, args.seed, tok)
    return D.workload_requests(args.dataset_path, args.num_prompts, args.vocab_size)


def _ladder(args) -> list[float]:
    if args.sweep_values:
        return [float(v) for v in args.sweep_values.split(",")]
    return [1, 2, 4, 8, 16, 32, 64]


def serve(args) -> int:
    from tachyon.bench.env import capture_env
    from tachyon.bench.metrics import make_slo
    from tachyon.bench.report_md import md_table
    from tachyon.bench.serve import LoadConfig, run_point
    from tachyon.bench.sweep import find_knee, max_sustainable_rate, replicas_needed, run_ladder
    from tachyon.bench.tables import runs_table

    slo = make_slo(args.slo, args.slo_ttft_ms, args.slo_tpot_ms, args.slo_e2e_ms, args.slo_percentile,
                   args.slo_max_error_rate)
    reqs = _requests(args)
    cfg = LoadConfig(base_url=args.base_url, model=args.model, process=args.process, rate=args.rate,
                     concurrency=args.concurrency, burstiness=args.burstiness, seed=args.seed,
                     stream=not args.no_stream, timeout_s=args.timeout, api_key=args.api_key,
                     continuous_usage=not args.no_continuous_usage, progress=not args.no_progress,
                     exact_chunk_tokens=args.exact_chunk_tokens)
    kind = "sweep" if (args.sweep or args.find_max_rate) else "serve"
    res = BenchResult(kind=kind, env=capture_env(), model=args.model, workload=args.dataset, seed=args.seed,
                      engine_args={"base_url": args.base_url, "num_prompts": len(reqs)})
    if args.sweep:
        res.runs += run_ladder(cfg, reqs, _ladder(args), args.sweep_mode, slo)
        knee = find_knee(res.runs)
        res.analysis["knee"] = res.runs[knee].label if knee is not None else "none found"
    if args.find_max_rate or (args.sweep and slo is not None and args.capacity):
        if slo is None:
            raise SystemExit("--find-max-rate needs an SLO (--slo or --slo-ttft-ms/--slo-tpot-ms)")
        rate, probes = max_sustainable_rate(cfg, reqs, slo, args.start_rate, rel_tol=args.rate_tol,
                                            max_probes=args.max_probes, min_duration_s=args.probe_duration)
        for i, r in enumerate(probes):
            r.label = f"probe{i}:{r.label}"
        res.runs += probes
        res.analysis.update(max_sustainable_rate=rate, slo=slo.name)
    if not res.runs:
        res.runs.append(run_point(cfg, reqs, slo))
    if args.capacity:
        rate = res.analysis.get("max_sustainable_rate")
        if rate is None:
            ok = [r.summary.request_throughput for r in res.runs if r.summary.slo_pass is not False]
            rate = max(ok) if ok else 0.0
        res.analysis.update(capacity_qps=args.capacity, headroom=args.headroom,
                            replicas=replicas_needed(args.capacity, rate, args.headroom))
    for r in res.runs:
        res.warnings += r.summary.extra.get("warnings", [])
    print(md_table(*runs_table(res)))
    for k, v in res.analysis.items():
        print(f"{k}: {v}")
    _finish(res, args)
    return 0


def compare(args) -> int:
    from tachyon.bench.compare import compare_results, format_table

    base, new = load_result(args.base), load_result(args.new)
    deltas = compare_results(base, new, args.threshold, args.bootstrap, args.seed)
    print(format_table(deltas))
    bad = [d for d in deltas if d.regression]
    if bad:
        print(f"REGRESSION in {len(bad)} metric(s): " + ", ".join(f"{d.run}:{d.metric} x{d.ratio:.3f}"
                                                               for d in bad), file=sys.stderr)
        return 1
    print("no regression")
    return 0


def report(args) -> int:
    from tachyon.bench.report import write_reports

    p = Path(args.result)
    files = write_reports(load_result(p), args.out or p.parent, stem=p.stem)
    for k, v in files.items():
        print(f"{k}: {v}")
    return 0


def plan(args) -> int:
    from tachyon.bench.plan import format_plan, make_plan

    model = args.model
    if model.endswith(".gguf"):
        from tachyon.models.gguf import gguf_to_hf_dir

        model = gguf_to_hf_dir(model)
    p = make_plan(model, args.gpu_mem, args.dtype, args.kv_dtype, args.tp, args.max_model_len,
                  args.gpu_memory_utilization, args.max_num_batched_tokens, args.max_num_seqs)
    print(json.dumps(p.as_dict(), indent=2) if args.json else format_plan(p))
    return 0
