"""`tachyon bench offline | serve | compare | report` and `tachyon plan` (argument parsing only)."""

from __future__ import annotations

import argparse

from tachyon.bench import commands


def _offline(sub) -> None:
    p = sub.add_parser("offline", help="offline throughput: one workload through one or more backends")
    p.add_argument("--backend", default="tachyon",
                   help="comma-separated: tachyon,hf,vllm (ratios vs the first)")
    p.add_argument("--model", default=None, help="HF dir, GGUF, or built-in shape (qwen2.5-7b, qwen3-0.6b)")
    p.add_argument("--dummy", action="store_true", help="random weights with the model's real shapes")
    p.add_argument("--workload", default="seed8", help="seed8 | bs1 | nano256 | path to a workload JSON")
    p.add_argument("--dtype", default="auto")
    p.add_argument("--device", default="auto")
    p.add_argument("--hf-batch-size", type=int, default=64, help="static batch size of the hf backend")
    p.add_argument("--num-requests", type=int, default=None, help="use only the first N requests")
    p.add_argument("--max-tokens", type=int, default=None, help="cap every request's output length")
    p.add_argument("--clamp-vocab", type=int, default=None, help="fold prompt ids into a small vocabulary")
    p.add_argument("--engine-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="extra tachyon/vllm engine argument (repeatable; values parsed as JSON)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-warmup", action="store_true")
    p.add_argument("--warmup-max-tokens", type=int, default=None,
                   help="cap the warm-up's output lengths (default: full length; the first requests, one static "
                        "batch for hf, four for the others)")
    p.add_argument("--repeats", type=int, default=1,
                   help="timed runs of the whole workload per backend (one load); the median one is reported, "
                        "every run's throughput is kept in the JSON")
    p.add_argument("--isolate", action=argparse.BooleanOptionalAction, default=None,
                   help="run each backend in its own fresh process (default: on when several backends share a GPU, "
                        "so that one's device-memory state cannot bias the next)")
    _outputs(p)
    p.set_defaults(func=commands.offline)


def _serve(sub) -> None:
    p = sub.add_parser("serve", help="load-test an OpenAI-compatible server (/v1/completions)")
    p.add_argument("--base-url", required=True, help="e.g. http://127.0.0.1:8000")
    p.add_argument("--model", required=True, help="model name sent in requests")
    p.add_argument("--api-key", default=None)
    d = p.add_argument_group("dataset")
    d.add_argument("--dataset", default="random",
                   choices=["random", "prompts", "sharegpt", "shared-prefix", "workload"])
    d.add_argument("--dataset-path", default=None, help="prompts file, ShareGPT JSON, or workload")
    d.add_argument("--num-prompts", type=int, default=100)
    d.add_argument("--input-len", type=int, default=256)
    d.add_argument("--output-len", type=int, default=128)
    d.add_argument("--len-dist", default="fixed", choices=["fixed", "uniform", "normal"])
    d.add_argument("--len-ratio", type=float, default=0.5, help="uniform: ±ratio; normal: std = ratio x mean")
    d.add_argument("--vocab-size", type=int, default=None,
                   help="random ids are drawn below this (default 32000); workloads: fold ids into it")
    d.add_argument("--prefix-len", type=int, default=512)
    d.add_argument("--num-groups", type=int, default=8)
    d.add_argument("--tokenizer", default=None, help="HF tokenizer for text datasets' lengths")
    a = p.add_argument_group("arrivals")
    a.add_argument("--process", default="poisson", choices=["closed", "constant", "poisson", "gamma"])
    a.add_argument("--rate", type=float, default=None, help="requests/s (open loop); omit = all at once")
    a.add_argument("--concurrency", type=int, default=None, help="closed loop: workers; open loop: cap")
    a.add_argument("--burstiness", type=float, default=1.0, help="gamma shape (<1 burstier)")
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--no-stream", action="store_true")
    a.add_argument("--timeout", type=float, default=600.0)
    a.add_argument("--exact-chunk-tokens", action="store_true",
                   help="ask for logprobs=0 so every chunk's token count is exact (multi-token chunks)")
    a.add_argument("--no-continuous-usage", action="store_true",
                   help="do not ask for per-chunk usage (servers that reject stream_options fields)")
    s = p.add_argument_group("SLO, sweeps, capacity")
    s.add_argument("--slo", default=None, help="mlperf-server | interactive | custom")
    s.add_argument("--slo-ttft-ms", type=float, default=None)
    s.add_argument("--slo-tpot-ms", type=float, default=None)
    s.add_argument("--slo-e2e-ms", type=float, default=None)
    s.add_argument("--slo-percentile", type=float, default=None)
    s.add_argument("--slo-max-error-rate", type=float, default=None)
    s.add_argument("--sweep", action="store_true", help="run a ladder of load points and find the knee")
    s.add_argument("--sweep-mode", default="concurrency", choices=["concurrency", "rate"])
    s.add_argument("--sweep-values", default=None, help="comma-separated ladder (default 1,2,4,...,64)")
    s.add_argument("--find-max-rate", action="store_true", help="SLO max sustainable rate (bisection)")
    s.add_argument("--start-rate", type=float, default=1.0)
    s.add_argument("--max-probes", type=int, default=12)
    s.add_argument("--probe-duration", type=float, default=30.0,
                   help="each max-rate probe sends at least rate x this many seconds of requests")
    s.add_argument("--rate-tol", type=float, default=0.1, help="relative width at which bisection stops")
    s.add_argument("--capacity", type=float, default=None, metavar="QPS", help="replicas needed for QPS")
    s.add_argument("--headroom", type=float, default=0.2)
    _outputs(p)
    p.set_defaults(func=commands.serve)


def _outputs(p: argparse.ArgumentParser) -> None:
    p.add_argument("--output", default=None, help="result JSON path (default out/bench/<kind>-<time>.json)")
    p.add_argument("--report-dir", default=None, help="also write Markdown/HTML/PNG reports here")
    p.add_argument("--no-progress", action="store_true")


def register(subparsers) -> None:
    bench = subparsers.add_parser("bench", help="benchmarks: offline, serve, compare, report")
    sub = bench.add_subparsers(dest="bench_command", required=True)
    _offline(sub)
    _serve(sub)
    c = sub.add_parser("compare", help="compare two results; exit 1 on a regression")
    c.add_argument("base")
    c.add_argument("new")
    c.add_argument("--threshold", type=float, default=0.10, help="relative change counted as material")
    c.add_argument("--bootstrap", type=int, default=1000)
    c.add_argument("--seed", type=int, default=0)
    c.set_defaults(func=commands.compare)
    r = sub.add_parser("report", help="Markdown + self-contained HTML + PNG charts from a result JSON")
    r.add_argument("result")
    r.add_argument("--out", default=None, help="folder (default: beside the result)")
    r.set_defaults(func=commands.report)

    p = subparsers.add_parser("plan", help="memory plan: weights, KV bytes/token, max concurrency x context")
    p.add_argument("--model", required=True, help="HF dir, GGUF file, or built-in shape")
    p.add_argument("--gpu-mem", required=True, help="e.g. 80GiB, 141GB")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--kv-dtype", default="auto", help="auto (= dtype) | fp8 | bfloat16 | float16 ...")
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--max-model-len", type=int, default=None)
    p.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    p.add_argument("--max-num-seqs", type=int, default=256)
    p.add_argument("--max-num-batched-tokens", type=int, default=2048)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=commands.plan)
