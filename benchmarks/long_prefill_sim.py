"""Replay Poisson arrivals through the engine's own Scheduler under a step-time model, to compare long-prefill rules
without a GPU: TTFT (mean, p90, p99) for all requests and for short and long prompts apart.

The step-time model is a rough Qwen2.5-7B one on an H100: 1.0 ms + max(4.6 ms, 23.5 us a token) + the decodes' KV
bytes (57,344 a context token) at 3.35 TB/s + each prompt chunk's causal attention over its prefix at 40% of the
bf16 FLOP floor (the Triton prefill kernel's measured 37-44% over 4K-16K contexts). Its absolute times are not a
prediction. On the uniform load of `session50/s61a/` (served over HTTP) it runs 12-25% under the measured mean and
p90 TTFT (without the attention term, --no-prefill-attention, the model before stop 64: 20-30%). Without the term,
on stop 60's nano256 load (64 requests, every 8th prompt 8,192 tokens, fcfs) it made the long prefills ~17% too
short and the short prompts' p90 52 ms against a measured 99: the p90 of ~56 short prompts hinges on the few that
arrive during a long prefill. With the term, at seed 0 (the probe's arrivals), fcfs without the cap gives short
39.4 / 96.2 ms mean / p90 and long 262.8 ms mean against a measured 40.3 / 99.1 and 260.5 (H100,
`session53/s63a_probe_86eb494/`); with the cap p90 56.1 against 38.3; flat is underestimated (124.0 against 164.9).
Across seeds the p90 moves 2-6x: rank rules by several seeds, and confirm on a GPU. Those probe figures read low by up
to one step (the probe stamped arrivals after the step in flight, fixed at stop 65). Against the corrected probe on
the arrivals of stop 65's server run (`session54/s65a_probe/`, cap 512), the model's short mean / p90 / p99 24.7 /
35.1 / 89.4 ms run 30% / 28% / 3% under the measured 35.5 / 49.0 / 91.7.

With --nano256 the trace is the first --num nano256 requests (their prompt and output lengths; seed 0's arrivals are
arrivals_probe.py's), and --policy picks the admission order (fcfs, the server's; flat, the offline LLM's on CUDA).

Usage: python3 benchmarks/long_prefill_sim.py [--rate 4] [--num 160] [--seeds 3] [--lens 205,3891] [--output 128]
           [--long-every K --long-len N] [--threshold 512] [--nano256] [--policy fcfs|flat]
           [--from-log JSONL [--slowest N]]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tachyon import SamplingParams  # noqa: E402
from tachyon.bench.schema import read_jsonl  # noqa: E402
from tachyon.bench.workloads import load_workload  # noqa: E402
from tachyon.engine.kv_cache import BlockPool, KVCacheManager  # noqa: E402
from tachyon.engine.request import Request, RequestStatus  # noqa: E402
from tachyon.engine.scheduler import Scheduler, SchedulerOutput  # noqa: E402

KV_BYTES_PER_TOKEN = 57_344  # Qwen2.5-7B: 28 layers x 4 KV heads x 128 x K and V x 2 bytes
ATTN_FLOPS_PER_QK = 4 * 28 * 3584  # Qwen2.5-7B: QK^T and PV, 28 layers x 28 query heads x 128, per (query, key) pair
PREFILL_ATTN_FLOPS = 0.40 * 778e12  # the Triton prefill kernel at 37-44% of the bf16 floor over 4K-16K contexts


def step_ms(out: SchedulerOutput, prefill_attention: bool = True) -> float:
    """Modelled time (ms) of one step: a fixed cost, the GEMMs by tokens, the decodes' KV reads and (unless
    prefill_attention is off, the pre-stop-64 model) each prompt chunk's causal attention over its prefix."""
    ctx = sum(r.num_computed_tokens for r, n in zip(out.requests, out.num_new_tokens) if n == 1)
    pairs = sum(n * (r.num_computed_tokens + n / 2) for r, n in zip(out.requests, out.num_new_tokens) if n > 1)
    attn = pairs * ATTN_FLOPS_PER_QK / PREFILL_ATTN_FLOPS * 1e3 if prefill_attention else 0.0
    return 1.0 + max(4.6, 0.0235 * out.total_tokens) + ctx * KV_BYTES_PER_TOKEN / 3.35e12 * 1e3 + attn


def replay(trace: list[tuple[float, int, int]], threshold: int, rule: str, budget: int = 2048,
           policy: str = "fcfs", prefill_attention: bool = True) -> list[float]:
    """TTFT (ms) of each (arrival s, prompt tokens, output tokens) request, in trace order."""
    s = Scheduler(KVCacheManager(BlockPool(100_000, 16)), max_num_seqs=256, max_num_batched_tokens=budget,
                  long_prefill_token_threshold=threshold, policy=policy)
    s.long_prefill_shorter = rule == "shorter"  # what TACHYON_LONG_PREFILL_RULE sets, without touching the env
    reqs = [Request(str(i), [3] * p, SamplingParams(max_tokens=o, ignore_eos=True), eos_token_ids=[],
                    max_model_len=65_536, sample_seed=0) for i, (_, p, o) in enumerate(trace)]
    order = sorted(range(len(trace)), key=lambda i: trace[i][0])
    now, k, first = 0.0, 0, {}
    while k < len(order) or s.num_unfinished:
        while k < len(order) and trace[order[k]][0] <= now:
            s.add(reqs[order[k]])
            k += 1
        if not s.num_unfinished:
            now = trace[order[k]][0]
            continue
        out = s.schedule()
        now += step_ms(out, prefill_attention) / 1e3
        for r, n in zip(out.requests, out.num_new_tokens):
            r.num_computed_tokens += n
            if r.num_computed_tokens >= r.num_tokens:
                first.setdefault(r.request_id, now)
                r.append_token(7)
                if r.num_output_tokens >= r.max_tokens:
                    s.finish(r, RequestStatus.FINISHED_LENGTH)
    return [(first[str(i)] - a) * 1e3 for i, (a, _, _) in enumerate(trace)]


def nearest_rank(xs: list[float], p: float) -> float:
    """The p-th percentile by nearest rank: the value at index floor(p / 100 * n) of the sorted values (the rule
    this script's and ttft_breakdown.py's figures use; tachyon.bench.metrics.percentile interpolates)."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=float, default=4.0)
    ap.add_argument("--num", type=int, default=160)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--lens", default="205,3891", help="prompt tokens, uniform in lo,hi")
    ap.add_argument("--output", type=int, default=128)
    ap.add_argument("--long-every", type=int, default=0, help="every K-th prompt is --long-len tokens (0: none)")
    ap.add_argument("--long-len", type=int, default=8192)
    ap.add_argument("--threshold", type=int, default=512)
    ap.add_argument("--nano256", action="store_true", help="the first --num nano256 requests' lengths")
    ap.add_argument("--policy", default="fcfs", choices=("fcfs", "flat"))
    ap.add_argument("--no-prefill-attention", action="store_true",
                    help="leave the prompt chunks' attention out of the step time (the model before stop 64)")
    ap.add_argument("--from-log", metavar="JSONL",
                    help="replay a `bench serve` per-request log (.requests.jsonl[.gz]): its send times and lengths, "
                         "and print its measured TTFT (to the first streamed byte) beside the model's")
    ap.add_argument("--slowest", type=int, default=0, metavar="N",
                    help="with --from-log: the N slowest short prompts measured, the model's TTFT for each (cap off "
                         "and --threshold under the shorter-waiter rule) and how long after the last long prompt "
                         "each was sent")
    args = ap.parse_args()
    nano = [(len(r.prompt_token_ids), r.max_tokens) for r in load_workload("nano256").requests] if args.nano256 else []
    if nano and args.num > len(nano):
        ap.error(f"--num must be at most {len(nano)} with --nano256, got {args.num}")
    lo, hi = map(int, args.lens.split(","))
    split = args.long_len if args.long_every or args.from_log else (lo + hi) // 2
    print(f"prompts < {split} tokens are short; TTFT ms: mean / p90 / p99")
    if args.from_log:
        rows = _read_log(args.from_log)
        trace = [(r["sent"], r["prompt_tokens"], r["max_tokens"]) for r in rows]
        ttft = [1e3 * (r["first_byte"] - r["sent"]) for r in rows]
        print(f"measured       : {_summary(ttft, trace, split)}")
        _report("log", trace, split, args)
        if args.slowest:
            _slowest(rows, trace, ttft, split, args)
        return
    for seed in range(args.seeds):
        rng = random.Random(seed)
        t, trace = 0.0, []
        for i in range(args.num):
            t += rng.expovariate(args.rate)
            long = args.long_every and i % args.long_every == args.long_every - 1
            if nano:
                p, o = nano[i]
                trace.append((t, args.long_len if long else p, o))
            else:
                trace.append((t, args.long_len if long else rng.randint(lo, hi), args.output))
        _report(f"seed {seed}", trace, split, args)


def _read_log(path: str) -> list[dict]:
    """The answered requests of a `bench serve` per-request log, in send order."""
    rows = read_jsonl(path)
    return sorted((r for r in rows if r.get("first_byte") is not None), key=lambda r: r["sent"])


def _summary(ttft: list[float], trace: list[tuple[float, int, int]], split: int) -> str:
    parts = []
    for name, keep in (("all", lambda p: True), ("short", lambda p: p < split), ("long", lambda p: p >= split)):
        xs = [x for x, (_, p, _) in zip(ttft, trace) if keep(p)]
        if xs:
            parts.append(f"{name} {statistics.mean(xs):.1f} / {nearest_rank(xs, 90):.1f} / {nearest_rank(xs, 99):.1f}")
    return " | ".join(parts)


def _report(label: str, trace: list[tuple[float, int, int]], split: int, args: argparse.Namespace) -> None:
    for threshold, rule in ((0, "any"), (args.threshold, "any"), (args.threshold, "shorter")):
        ttft = replay(trace, threshold, rule, policy=args.policy, prefill_attention=not args.no_prefill_attention)
        print(f"{label} T={threshold} {rule:7}: {_summary(ttft, trace, split)}")


def _slowest(rows: list[dict], trace: list[tuple[float, int, int]], measured: list[float], split: int,
             args: argparse.Namespace) -> None:
    attn = not args.no_prefill_attention
    off = replay(trace, 0, "shorter", policy=args.policy, prefill_attention=attn)
    on = replay(trace, args.threshold, "shorter", policy=args.policy, prefill_attention=attn)
    short = sorted((i for i, (_, p, _) in enumerate(trace) if p < split), key=lambda i: measured[i])[-args.slowest:]
    print(f"slowest short prompts: id, prompt tokens, sent (s), TTFT measured / model cap 0 / model cap "
          f"{args.threshold} (ms), ms since the last long prompt was sent")
    for i in short:
        sent, p, _ = trace[i]
        before = [t for t, q, _ in trace if q >= split and t <= sent]
        since = f"{1e3 * (sent - before[-1]):6.1f}" if before else "  none"
        print(f"  {rows[i]['id']:>4} {p:5d} {sent:8.3f} {measured[i]:7.1f} / {off[i]:6.1f} / {on[i]:6.1f}  {since}")


if __name__ == "__main__":
    main()
