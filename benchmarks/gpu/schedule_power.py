"""Does a schedule that keeps the tensor cores busier finish Qwen2.5-7B nano256 sooner at the board's power cap,
or does the cap's energy bound it whatever the order? Replays each policy's steps from `benchmarks/schedule_sim.py
--dump` as the GEMMs the engine would run (28 layers of qkv / o / gate_up / down at the step's rows, lm_head at
its sampled rows, cuBLAS through torch.mm, weights N(0, 0.02) as the dummy loader draws them) and, with `--attn`,
a read of the step's KV bytes per layer (a sum over a KV-sized buffer: the decode attention's DRAM traffic, not its
arithmetic). Policies alternate in rounds; each run reports seconds, the tok/s its time would give, NVML energy,
median board power and SM clock, and the share of power-cap-throttled samples.

What it leaves out, the same for every policy: norms, activation, rotary, sampling and step gaps (~0.7 ms a step
in the engine), prefill attention's arithmetic, the last layer's kept-rows pruning.

Usage (GPU machine, repo root): python3 benchmarks/schedule_sim.py --dump /tmp/sched.json
  python3 benchmarks/gpu/schedule_power.py --schedules /tmp/sched.json --policies fcfs,longest-288 --attn \
      --rounds 2 --out $OUT/schedule_power.json
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from clock_sampler import ClockSampler, energy_reader  # same folder (the script folder is on sys.path)

HIDDEN, INTER, QKV, VOCAB, LAYERS = 3584, 18944, 4608, 152064, 28  # Qwen2.5-7B
KV_BYTES_PER_TOKEN_LAYER = 2048  # K and V x 4 KV heads x 128 x 2 bytes


class Replayer:
    """Owns the weights and activation buffers; `run(steps)` enqueues every step's GEMMs (and KV reads)."""

    def __init__(self, max_rows: int, max_lm: int, max_ctx: int, attn: bool) -> None:
        dev, bf = "cuda", torch.bfloat16
        g = torch.Generator(device=dev).manual_seed(0)

        def w(n: int, k: int) -> torch.Tensor:
            return (torch.randn(n, k, device=dev, dtype=bf, generator=g) * 0.02).t()  # F.linear's layout, as K x N

        self.layers = [(w(QKV, HIDDEN), w(HIDDEN, HIDDEN), w(2 * INTER, HIDDEN), w(HIDDEN, INTER))
                       for _ in range(LAYERS)]
        self.lm = w(VOCAB, HIDDEN)
        self.x = torch.randn(max_rows, HIDDEN, device=dev, dtype=bf, generator=g)
        self.h = torch.randn(max_rows, INTER, device=dev, dtype=bf, generator=g) * 0.5
        self.outs = [torch.empty(max_rows, n, device=dev, dtype=bf) for n in (QKV, HIDDEN, 2 * INTER, HIDDEN)]
        self.logits = torch.empty(max_lm, VOCAB, device=dev, dtype=bf)
        self.attn = attn
        # one layer's worth of the largest step's KV: every layer re-reads it (far larger than L2)
        self.kv = torch.randn(max(max_ctx, 1) * KV_BYTES_PER_TOKEN_LAYER // 2, device=dev, dtype=bf,
                              generator=g) if attn else None
        self.kv_sum = torch.empty((), device=dev, dtype=torch.float32)

    def step(self, rows: int, lm_rows: int, ctx: int) -> None:
        x, h = self.x[:rows], self.h[:rows]
        n_kv = ctx * KV_BYTES_PER_TOKEN_LAYER // 2
        for wq, wo, wgu, wd in self.layers:
            torch.mm(x, wq, out=self.outs[0][:rows])
            if self.attn and n_kv:
                torch.sum(self.kv[:n_kv], dim=0, dtype=torch.float32, out=self.kv_sum)
            torch.mm(x, wo, out=self.outs[1][:rows])
            torch.mm(x, wgu, out=self.outs[2][:rows])
            torch.mm(h, wd, out=self.outs[3][:rows])
        if lm_rows:
            torch.mm(self.x[:lm_rows], self.lm, out=self.logits[:lm_rows])

    def run(self, steps: list[list[int]]) -> None:
        for rows, lm_rows, _prefill, ctx in steps:
            self.step(rows, lm_rows, ctx)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--schedules", required=True, help="benchmarks/schedule_sim.py --dump output")
    ap.add_argument("--policies", default="fcfs,longest-288")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--attn", action="store_true", help="also read each step's KV bytes per layer")
    ap.add_argument("--gap-s", type=float, default=1.0, help="idle seconds before each run")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    sched = json.loads(open(a.schedules).read())
    names = a.policies.split(",")
    pol = {n: sched["policies"][n] for n in names}
    every = [s for n in names for s in pol[n]]
    rep = Replayer(max(s[0] for s in every), max(s[1] for s in every), max(s[3] for s in every), a.attn)
    # cuBLAS's heuristics per row count are host work: settle every (shape, rows) once before timing
    max_lm = max(s[1] for s in every)
    for rows in sorted({s[0] for s in every} | {s[1] for s in every}):
        rep.step(rows, min(rows, max_lm), 0)
    torch.cuda.synchronize()
    rep.run(pol[names[0]])  # the board warms up as in the engine's run (after its own warm-up)
    torch.cuda.synchronize()
    energy = energy_reader()
    results = []
    for rnd in range(a.rounds):
        for n in names:
            time.sleep(a.gap_s)
            with ClockSampler(0.05) as clocks:
                e0 = energy() if energy else None
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                rep.run(pol[n])
                end.record()
                torch.cuda.synchronize()
                e1 = energy() if energy else None
            s = start.elapsed_time(end) / 1e3
            row = {"round": rnd, "policy": n, "steps": len(pol[n]), "seconds": s,
                   "tok_s_at_this_time": sched["output_tokens"] / s,
                   "energy_j": e1 - e0 if e1 is not None else None,
                   **clocks.summary()}
            results.append(row)
            print(json.dumps(row), flush=True)
    with open(a.out, "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "attn": a.attn,
                   "schedules": a.schedules, "runs": results}, f, indent=1)
    print("policy | runs (s) | energy (J) | median W | median MHz | capped")
    for n in names:
        rs = [r for r in results if r["policy"] == n]
        secs = ", ".join(f"{r['seconds']:.3f}" for r in rs)
        joules = ", ".join(f"{r['energy_j']:.0f}" for r in rs if r["energy_j"] is not None)
        last = rs[-1]
        print(f"{n} | {secs} | {joules} | {last['power_w_median']} | {last['sm_mhz_median']} | "
              f"{last['power_capped_share']}")


if __name__ == "__main__":
    main()
