"""Where a decode step's time goes on the GPU: graph replay time per batch bucket vs the measured
TPOT (host-bound if TPOT >> replay), and the top kernels of one eager decode step (torch.profiler).

Usage (GPU machine, repo root): python3 benchmarks/gpu/profile_step.py --out $OUT [--shapes ...]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from tachyon import LLM, SamplingParams  # noqa: E402


def replay_ms(graphs, bucket: int, iters: int = 50) -> float:
    return graph_replay_ms(graphs.graphs[bucket], iters)


def graph_replay_ms(g, iters: int = 50) -> float:
    """Mean ms per replay of CUDA graph `g` over `iters` back-to-back replays (after one untimed replay)."""
    g.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        g.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iters


def _eager_kernels(graphs, bs: int, steps: int = 3) -> tuple[list[dict], int]:
    """Kernels of `steps` eager decode steps of bucket `bs` by GPU time (per step), and launches per step."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            graphs._step(bs)
        torch.cuda.synchronize()
    ev = sorted(prof.key_averages(), key=lambda e: -e.device_time_total)
    rows = [dict(name=e.key[:80], calls=e.count // steps, us_per_step=e.device_time_total / steps) for e in ev]
    return rows, sum(e.count for e in ev) // steps


def device_events(prof) -> list[tuple[str, float, float]]:
    """(name, start us, end us) of every device operation of a torch.profiler run that took time, by start."""
    return sorted(((e.name, e.time_range.start, e.time_range.end) for e in prof.events()
                   if e.device_type == torch.autograd.DeviceType.CUDA and e.time_range.end > e.time_range.start),
                  key=lambda x: x[1])


@contextmanager
def token_waits(on_wait: Callable[[float], None]) -> Iterator[None]:
    """Within it, every PendingStep.tokens() call (the engine waiting for a launched step's tokens) reports its
    duration in seconds to on_wait; the method is restored on exit."""
    from tachyon.engine import runner as runner_mod

    orig = runner_mod.PendingStep.tokens

    def timed_tokens(self):
        t = time.perf_counter()
        out = orig(self)
        on_wait(time.perf_counter() - t)
        return out

    runner_mod.PendingStep.tokens = timed_tokens
    try:
        yield
    finally:
        runner_mod.PendingStep.tokens = orig


def timed_generate(llm: LLM, prompts: list, params) -> dict:
    """One llm.generate(prompts, params) with every engine step timed: the step's wall time and the part spent
    waiting for the GPU (PendingStep.tokens); wait ~ 0 means the host is the bottleneck. Medians in ms."""
    waits: list[float] = []
    steps: list[float] = []
    engine = llm.engine
    orig_step = engine.step

    def timed_step(*a, **k):
        t = time.perf_counter()
        out = orig_step(*a, **k)
        steps.append(time.perf_counter() - t)
        return out

    engine.step = timed_step
    try:
        with token_waits(waits.append):
            t0 = time.perf_counter()
            llm.generate(prompts, params, use_tqdm=False)
            wall = time.perf_counter() - t0
    finally:
        engine.step = orig_step
    step_ms = 1e3 * sorted(steps)[len(steps) // 2]
    wait_ms = 1e3 * sorted(waits)[len(waits) // 2] if waits else None
    return dict(steps=len(steps), wall_s=wall, step_ms_median=step_ms, wait_ms_median=wait_ms,
                host_ms_median=step_ms - (wait_ms or 0.0))


def engine_loop(llm: LLM) -> dict:
    """seed8-shaped decode loop (8 prompts, temperature 0.7, top-p 0.9), after one warm-up run: timed_generate."""
    prompts = [[11 + i] * (15 + 3 * i) for i in range(8)]
    params = [SamplingParams(temperature=0.7, top_p=0.9, seed=i, max_tokens=128, ignore_eos=True) for i in range(8)]
    llm.generate(prompts, params, use_tqdm=False)
    return timed_generate(llm, prompts, params)


def profile_shape(shape: str) -> dict:
    t0 = time.perf_counter()
    llm = LLM(shape, load_format="dummy", max_model_len=4096, max_num_batched_tokens=8192, max_num_seqs=512)
    startup_s = time.perf_counter() - t0
    sp = SamplingParams(temperature=0, max_tokens=256, ignore_eos=True)
    llm.generate([[7] * 128], sp, use_tqdm=False)
    t0 = time.perf_counter()
    out = llm.generate([[7] * 128], sp, use_tqdm=False)[0]
    dt = time.perf_counter() - t0
    tpot = (out.metrics.finished_time - out.metrics.first_token_time) / 255
    graphs = llm.engine.runner.graphs
    res = dict(shape=shape, startup_s=startup_s, pdl=os.environ.get("TACHYON_PDL", "1") != "0",
               bs1_tpot_ms=tpot * 1e3, bs1_tok_s=256 / dt,
               replay_ms={b: replay_ms(graphs, b) for b in (1, 8, 64, 256, 512) if b in graphs.graphs})
    # the same bucket-8 graph with seed8's sampling (temperature 0.7, top-p 0.9) in its input buffers
    graphs.temperature[:8] = 0.7
    graphs.top_p[:8] = 0.9
    res["replay_ms_b8_top_p"] = replay_ms(graphs, 8)
    graphs.temperature.zero_()
    graphs.top_p.fill_(1.0)
    res["seed8_loop"] = engine_loop(llm)
    # per-kernel GPU time of one eager decode step (bs1 greedy; bucket 8 with seed8's sampling)
    rows, launches = _eager_kernels(graphs, 1)
    res["eager_bs1_kernels"] = rows[:15]
    res["eager_bs1_kernel_launches"] = launches
    graphs.temperature[:8] = 0.7
    graphs.top_p[:8] = 0.9
    res["eager_b8_top_p_kernels"] = _eager_kernels(graphs, 8)[0][:12]
    graphs.temperature.zero_()
    graphs.top_p.fill_(1.0)
    del llm, graphs
    gc.collect()
    torch.cuda.empty_cache()
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="out")
    ap.add_argument("--shapes", default="qwen3-0.6b,qwen2.5-7b")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for shape in args.shapes.split(","):
        r = profile_shape(shape)
        results.append(r)
        (out / "profile_step.json").write_text(json.dumps(results, indent=1))
        print(f"{shape}: start-up {r['startup_s']:.1f} s; pdl {r['pdl']}", flush=True)
        print(f"{shape}: bs1 TPOT {r['bs1_tpot_ms']:.3f} ms; graph replay ms {r['replay_ms']}; "
              f"b8 top-p replay {r['replay_ms_b8_top_p']:.3f} ms; seed8 loop {r['seed8_loop']}; "
              f"{r['eager_bs1_kernel_launches']} kernels/step", flush=True)
        for k in r["eager_bs1_kernels"][:10]:
            print(f"   {k['us_per_step']:9.1f} us  x{k['calls']:4d}  {k['name']}", flush=True)


if __name__ == "__main__":
    main()
