"""Where a bs1 run's first step goes, with the prefill launched without waiting (overlap) or synchronously.

The engine is built as `tachyon bench offline` builds it (the model's own max_model_len, a 2,048-token step
budget). Rounds alternate between the two prefill modes. Each round times one greedy bs1 generation (128-token
prompt, 256 new tokens): wall time, TTFT and TPOT from the request's metrics, and CUDA events around the
prefill step and the first decode step: the prefill's GPU time (input upload + graph), the GPU's idle gap
from the prefill's end to the first decode's start, and host times from the call to generate to each launch.
It also replays the prefill graph alone (GPU time of the step without its host side).

Usage (GPU machine, repo root): python3 benchmarks/gpu/ttft_probe.py --shape qwen3-0.6b --rounds 6 --out $OUT
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from benchmarks.gpu.profile_step import graph_replay_ms  # noqa: E402
from tachyon import LLM, SamplingParams  # noqa: E402


class FirstSteps:
    """Wraps the runner's prefill-graph and decode-graph `run` for one generation: events and host clocks at the
    prefill's start and end and at the first decode step's start."""

    def __init__(self, runner):
        self.runner = runner
        self.marks: dict[str, tuple[torch.cuda.Event, float]] = {}

    def _mark(self, name: str) -> None:
        if name not in self.marks:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            self.marks[name] = (ev, time.perf_counter())

    def __enter__(self):
        pg, dg = self.runner.prefill_graphs, self.runner.graphs
        self._orig = (pg.run, dg.run)

        def prefill_run(sched):
            self._mark("prefill_start")
            out = self._orig[0](sched)
            self._mark("prefill_end")
            return out

        def decode_run(*a, **k):
            self._mark("decode_start")
            return self._orig[1](*a, **k)

        pg.run, dg.run = prefill_run, decode_run
        return self

    def __exit__(self, *exc):
        del self.runner.prefill_graphs.run, self.runner.graphs.run

    def report(self, t0: float) -> dict:
        torch.cuda.synchronize()
        ev = {k: v[0] for k, v in self.marks.items()}
        host = {f"host_ms_to_{k}": 1e3 * (v[1] - t0) for k, v in self.marks.items()}
        return dict(host, gpu_prefill_ms=ev["prefill_start"].elapsed_time(ev["prefill_end"]),
                    gpu_gap_prefill_to_decode_ms=ev["prefill_end"].elapsed_time(ev["decode_start"]))


def one_round(llm: LLM, prompt: list[int], sp: SamplingParams, tokens: int) -> dict:
    with FirstSteps(llm.engine.runner) as fs:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        o = llm.generate([prompt], sp, use_tqdm=False)[0]
        torch.cuda.synchronize()
        wall = time.perf_counter() - t0
    m = o.metrics
    return dict(tok_s=tokens / wall, wall_ms=1e3 * wall, ttft_ms=1e3 * (m.first_token_time - m.arrival_time),
                tpot_ms=1e3 * (m.finished_time - m.first_token_time) / (tokens - 1), **fs.report(t0))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="out")
    ap.add_argument("--shape", default="qwen3-0.6b")
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=6, help="rounds per mode, alternating")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    llm = LLM(args.shape, load_format="dummy", max_num_batched_tokens=2048)
    runner = llm.engine.runner
    prompt = [7] * args.prompt_len
    sp = SamplingParams(temperature=0, max_tokens=args.tokens, ignore_eos=True)
    launchable = runner._prefill_launchable
    modes = {"overlap": launchable, "sync": lambda sched: False}
    for mode in modes:  # warm-up, both paths
        runner._prefill_launchable = modes[mode]
        llm.generate([prompt], sp, use_tqdm=False)
    res: dict = {"shape": args.shape, "tokens": args.tokens, "prompt_len": args.prompt_len, "rounds": {}}
    for _ in range(args.rounds):
        for mode, fn in modes.items():
            runner._prefill_launchable = fn
            r = one_round(llm, prompt, sp, args.tokens)
            res["rounds"].setdefault(mode, []).append(r)
            print(f"{args.shape} {mode}: " + ", ".join(f"{k} {v:.4f}" for k, v in r.items()), flush=True)
    runner._prefill_launchable = launchable
    res["median"] = {mode: {k: statistics.median(r[k] for r in rs) for k in rs[0]}
                     for mode, rs in res["rounds"].items()}
    pg = runner.prefill_graphs
    key = (pg._bucket(pg.token_buckets, args.prompt_len), 1)
    res["prefill_graph_replay_ms"] = graph_replay_ms(pg.graphs[key], iters=20)
    for mode, med in res["median"].items():
        print(f"{args.shape} median {mode}: " + ", ".join(f"{k} {v:.4f}" for k, v in med.items()))
    print(f"{args.shape} prefill graph {key} replay {res['prefill_graph_replay_ms']:.4f} ms")
    (out / f"ttft_probe_{args.shape}.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
