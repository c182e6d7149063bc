"""Requests arriving while others decode (a serving-like load on the engine itself, no HTTP): the first N nano256
requests arrive as a Poisson process at --rate per second and are added to the engine as their time comes, the
engine stepping in between at the server's defaults (2,048 tokens a step, fcfs admission), so new prompts land in
mixed steps beside running decodes. (Before stop 63 the policy was left to `LLM`'s CUDA default, flat: stop 60's
runs, session49/s60a, were under flat; the JSON now records the policy the engine ran.)
Records per-request TTFT and TPOT, output tok/s, and the engine's step counts by kind
(mixed graphs launched or run); run once per engine setting (e.g. --engine-arg mixed_graph_max_tokens=0) in its
own process and compare. With --long-every K, every K-th request's prompt is its own tokens repeated to --long-len
tokens (a long document among chat turns; TTFT is then reported for the short and the long requests apart), the
load that long_prefill_token_threshold is for. --arrivals-from takes a `bench serve` request log's send times instead
of the Poisson draw, so the engine alone runs on the very arrivals a server run saw. Writes arrivals_<tag>.json
under --out, with each request's TTFT and the Triton compiles after start-up (kernels/late_compiles.py) during the
warm-up request and the run. --warmup 0 leaves the warm-up request out, so the first request pays whatever start-up
left cold, as a server's first request does; --engine-thread steps the engine on a fresh thread, as the server does.

TTFT runs from a request's scheduled arrival to the step call that returns its first token (`drive`). Before stop 65
the probe stamped a request when its loop reached it, after the step in flight had ended, and took the engine's own
first-token stamp, so every TTFT it reported (session49-53) left out up to one long step (a long prefill chunk's
~60 ms on an H100) and the hold of a drawn token behind the synchronous step after it (fixed in the engine at stop 65).

Usage (GPU machine, repo root):
  python3 benchmarks/gpu/arrivals_probe.py --shape qwen2.5-7b --rate 4 --num 64 --out DIR [--engine-arg k=v ...]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from benchmarks.gpu.engine_smoke import load_workload  # noqa: E402
from tachyon import LLM, SamplingParams  # noqa: E402
from tachyon.bench.schema import read_jsonl  # noqa: E402


def _arg(kv: str) -> tuple[str, object]:
    k, v = kv.split("=", 1)
    for cast in (int, float):
        try:
            return k, cast(v)
        except ValueError:
            pass
    return k, v


def _ttft_split(rows: list[dict]) -> dict:
    """Mean, p90 and p99 TTFT (ms) of the short and the long requests apart (empty when no request is long)."""
    out = {}
    for name, flag in (("short", False), ("long", True)):
        t = [r["ttft"] for r in rows if r["long"] == flag]
        if t and any(r["long"] for r in rows):
            out[f"ttft_{name}_mean_ms"] = 1e3 * statistics.mean(t)
            out[f"ttft_{name}_p90_ms"] = 1e3 * (statistics.quantiles(t, n=10)[-1] if len(t) > 1 else t[0])
            out[f"ttft_{name}_p99_ms"] = 1e3 * (statistics.quantiles(t, n=100)[-1] if len(t) > 1 else t[0])
    return out


def _poisson(rate: float, n: int) -> list[float]:
    rng = random.Random(0)
    arrivals, t = [], 0.0
    for _ in range(n):
        t += rng.expovariate(rate)
        arrivals.append(t)
    return arrivals


def _logged_arrivals(path: str, prompt_lens: list[int]) -> list[float]:
    """Scheduled send times (s) of requests "0".."n-1" in a bench-serve request log, whose prompt lengths must be
    prompt_lens (the probe's prompts, in order): the engine alone then replays that run's very requests."""
    rows = {r["id"]: r for r in read_jsonl(path)}
    n = len(prompt_lens)
    missing = [str(i) for i in range(n) if str(i) not in rows]
    if missing:
        raise SystemExit(f"--arrivals-from: {path} lacks request ids {missing[:5]} (needs ids 0..{n - 1})")
    wrong = [i for i in range(n) if rows[str(i)]["prompt_tokens"] != prompt_lens[i]]
    if wrong:
        i = wrong[0]
        raise SystemExit(f"--arrivals-from: request {i} has {rows[str(i)]['prompt_tokens']} prompt tokens in {path}, "
                         f"{prompt_lens[i]} here ({len(wrong)} requests differ): not the same workload")
    return [rows[str(i)]["scheduled"] for i in range(n)]


def drive(eng, prompts: list[list[int]], params: list[SamplingParams], arrivals: list[float],
          long_ids: set[str]) -> tuple[list[dict], float]:
    """Add request i (id f"a{i}") once arrivals[i] seconds have passed, stepping `eng` (an LLMEngine) in between
    until all finish; return one row per request (id, long, ttft, ttft_engine, tpot, tokens) and the wall time.

    TTFT runs from the request's scheduled arrival to the return of the step call that hands out its first token,
    what a server's handler sees: a request that arrives during a step waits for that step to end, and a token the
    engine has drawn counts only once the engine returns it (ttft_engine: to the engine's own first-token stamp).
    Before stop 65 the probe stamped arrivals when its loop reached them and took the engine's stamp, leaving both
    waits out."""
    t0, wall0 = time.perf_counter(), time.time()
    done: dict[str, dict] = {}
    first_seen: dict[str, float] = {}
    i = 0
    while i < len(prompts) or eng.has_unfinished():
        now = time.perf_counter() - t0
        while i < len(prompts) and arrivals[i] <= now:
            eng.add_request(f"a{i}", prompts[i], params[i], arrival_time=wall0 + arrivals[i])
            i += 1
        if not eng.has_unfinished():
            time.sleep(max(0.0, arrivals[i] - (time.perf_counter() - t0)))
            continue
        outs = eng.step()
        returned = time.time()
        for o in outs:
            n = len(o.outputs[0].token_ids)
            if n and o.request_id not in first_seen:
                first_seen[o.request_id] = returned
            if o.finished:
                m = o.metrics
                done[o.request_id] = dict(id=o.request_id, long=o.request_id in long_ids,
                                          ttft=first_seen[o.request_id] - m.arrival_time,
                                          ttft_engine=m.first_token_time - m.arrival_time,
                                          tpot=(m.finished_time - m.first_token_time) / max(n - 1, 1), tokens=n)
    return list(done.values()), time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="qwen2.5-7b")
    ap.add_argument("--rate", type=float, default=4.0, help="arrivals per second")
    ap.add_argument("--num", type=int, default=64)
    ap.add_argument("--engine-arg", action="append", default=[], type=_arg)
    ap.add_argument("--long-every", type=int, default=0, help="every K-th request gets a --long-len prompt (0: none)")
    ap.add_argument("--long-len", type=int, default=8192)
    ap.add_argument("--arrivals-from", metavar="JSONL",
                    help="a `bench serve` per-request log (.requests.jsonl[.gz]) of the same requests: take its "
                         "scheduled send times instead of a seed-0 Poisson draw (the engine alone on the server's "
                         "own arrivals)")
    ap.add_argument("--min-tokens", action="store_true",
                    help="min_tokens = max_tokens on every request, as `bench serve` sends (with ignore_eos): the rows "
                         "then carry a stop-token ban the sampler redraws on the device")
    ap.add_argument("--warmup", type=int, default=1, choices=(0, 1),
                    help="1: one 8-token request on the first prompt before the run (its kernels and shapes warm); "
                         "0: none, so the first request pays whatever start-up left cold, as a server's does")
    ap.add_argument("--engine-thread", action="store_true",
                    help="step the engine on a fresh thread, as the server's AsyncEngine does; default: the thread "
                         "that built it")
    ap.add_argument("--idle-before", type=float, default=0.0, metavar="S",
                    help="sleep S seconds after start-up (and the warm-up) before the first arrival, as a server "
                         "idles before its first request (the GPU's clocks may drop meanwhile)")
    ap.add_argument("--tag", default="")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    engine_args = dict(max_model_len=4096, max_num_batched_tokens=2048, scheduling_policy="fcfs")
    engine_args |= dict(args.engine_arg)
    llm = LLM(args.shape, load_format="dummy", **engine_args)
    eng, runner = llm.engine, llm.engine.runner
    reqs = load_workload("nano256")[: args.num]
    long_ids = set()
    if args.long_every > 0:
        for j in range(args.long_every - 1, len(reqs), args.long_every):
            ids = reqs[j]["prompt_token_ids"]
            reqs[j] = dict(reqs[j], prompt_token_ids=(ids * (args.long_len // len(ids) + 1))[: args.long_len])
            long_ids.add(f"a{j}")
    if args.warmup:
        llm.generate([reqs[0]["prompt_token_ids"]], SamplingParams(max_tokens=8, ignore_eos=True), use_tqdm=False)
    late0 = eng.late_compiles.count
    arrivals = (_logged_arrivals(args.arrivals_from, [len(r["prompt_token_ids"]) for r in reqs]) if args.arrivals_from
                else _poisson(args.rate, len(reqs)))
    kinds = dict(mixed_launched=runner.num_mixed_launched, prefill_launched=runner.num_prefills_launched,
                 decode_launched=runner.num_launched)
    mixed = runner.mixed_graphs
    mixed_runs = [0]
    if mixed is not None:
        orig = mixed.run

        def counted(*a, **k):
            mixed_runs[0] += 1
            return orig(*a, **k)
        mixed.run = counted
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    params = [SamplingParams(max_tokens=r["max_tokens"], min_tokens=r["max_tokens"] if args.min_tokens else 0,
                             temperature=0.0, ignore_eos=True) for r in reqs]
    prompts = [r["prompt_token_ids"] for r in reqs]
    time.sleep(args.idle_before)
    if args.engine_thread:
        with ThreadPoolExecutor(1) as pool:
            rows, wall = pool.submit(drive, eng, prompts, params, arrivals, long_ids).result()
    else:
        rows, wall = drive(eng, prompts, params, arrivals, long_ids)
    tokens = sum(r["tokens"] for r in rows)
    result = dict(shape=args.shape, rate=args.rate, num=len(rows), engine_args=engine_args,
                  policy=eng.config.scheduling_policy, wall_s=wall,
                  output_tok_s=tokens / wall, startup=eng.startup,
                  ttft_mean_ms=1e3 * statistics.mean(r["ttft"] for r in rows),
                  ttft_p90_ms=1e3 * statistics.quantiles([r["ttft"] for r in rows], n=10)[-1],
                  tpot_mean_ms=1e3 * statistics.mean(r["tpot"] for r in rows),
                  tpot_p90_ms=1e3 * statistics.quantiles([r["tpot"] for r in rows], n=10)[-1],
                  long_every=args.long_every, long_len=args.long_len,
                  **_ttft_split(rows),
                  mixed_graph_runs=mixed_runs[0],
                  mixed_launched=runner.num_mixed_launched - kinds["mixed_launched"],
                  prefill_launched=runner.num_prefills_launched - kinds["prefill_launched"],
                  decode_launched=runner.num_launched - kinds["decode_launched"],
                  arrivals_from=args.arrivals_from, min_tokens=args.min_tokens, warmup=args.warmup,
                  engine_thread=args.engine_thread, idle_before_s=args.idle_before,
                  late_compiles_warmup=late0, late_compiles_run=eng.late_compiles.count - late0,
                  late_compile_events=[dict(kernel=e.kernel, spec=e.specialization, ms=round(1e3 * (e.seconds or 0), 1))
                                       for e in eng.late_compiles.events],
                  requests=[dict(id=r["id"], long=r["long"], ttft_ms=round(1e3 * r["ttft"], 2),
                                 ttft_engine_ms=round(1e3 * r["ttft_engine"], 2)) for r in rows])
    print(json.dumps({k: round(v, 2) if isinstance(v, float) else v for k, v in result.items()
                      if k not in ("startup", "requests", "late_compile_events")}),
          flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"arrivals_{Path(args.shape).name}_{args.tag}.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
