"""Would two-batch overlap pay at the power cap? A large decode step's GEMMs are compute-bound and its attention is
bound by the KV read, and the two run one after the other. This probe replays the decoder layers of a Qwen2.5-7B
decode step (qkv, the engine's decode attention over a paged cache, o, gate_up, SiLU-and-mul, down; norms left
out) as CUDA graphs in three forms and times each held for --seconds at the cap:

  serial   the whole batch, one stream (what the engine does);
  split    two half batches one after the other, per layer (the cost of halving the GEMMs' rows);
  overlap  the two halves on two streams, half B one phase behind half A, so each half's attention phase (qkv +
           attention) runs beside the other half's MLP phase (o + gate_up + down); an event barrier per phase
           keeps them paired.

Prints ms per step, TFLOP/s of the GEMMs, mean board power, SM clock and power-capped share; writes
overlap_probe.json under --out. Needs only torch, triton and the repo (no model load).

Usage (GPU machine, repo root): python3 benchmarks/gpu/overlap_probe.py --out DIR [--batches 256,192] [--ctx 1000]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from benchmarks.gpu.clock_sampler import ClockSampler  # noqa: E402
from tachyon import kernels  # noqa: E402

H, INTER, HQ, HKV, D, PAGE, MAX_LEN = 3584, 18944, 28, 4, 128, 16, 4096  # Qwen2.5-7B


class Layers:
    """Per-layer weights and paged KV caches for `batch` sequences of `ctx` tokens (distinct per layer: no L2
    reuse across layers)."""

    def __init__(self, layers: int, batch: int, ctx: int, dev: str = "cuda") -> None:
        bf = torch.bfloat16 if dev == "cuda" else torch.float32

        def w(n: int, k: int) -> torch.Tensor:
            return torch.randn(n, k, device=dev, dtype=bf) * 0.02

        self.w = [(w(HQ * D + 2 * HKV * D, H), w(H, HQ * D), w(2 * INTER, H), w(H, INTER)) for _ in range(layers)]
        nblk = -(-ctx // PAGE)
        self.caches = [torch.randn(2, batch * nblk, PAGE, HKV, D, device=dev, dtype=bf) for _ in range(layers)]
        self.block_tables = torch.arange(batch * nblk, device=dev, dtype=torch.int32).view(batch, nblk)
        self.seq_lens = torch.full((batch,), ctx, device=dev, dtype=torch.int32)
        self.qsl = torch.arange(batch + 1, device=dev, dtype=torch.int32)
        self.batch = batch

    def attn_phase(self, i: int, x: torch.Tensor, rows: slice) -> torch.Tensor:
        m = x.shape[0]
        qkv = torch.mm(x, self.w[i][0].t())
        q = qkv[:, : HQ * D].view(m, HQ, D)
        return kernels.attention(q, self.caches[i], self.qsl[: m + 1], self.seq_lens[rows], self.block_tables[rows],
                                 1, MAX_LEN, D ** -0.5)

    def mlp_phase(self, i: int, o: torch.Tensor) -> torch.Tensor:
        h = torch.mm(o.reshape(o.shape[0], HQ * D), self.w[i][1].t())
        gu = torch.mm(h, self.w[i][2].t())
        return torch.mm(kernels.silu_and_mul(gu), self.w[i][3].t())


def serial(stack: Layers, x: torch.Tensor) -> torch.Tensor:
    rows = slice(0, x.shape[0])
    for i in range(len(stack.w)):
        x = stack.mlp_phase(i, stack.attn_phase(i, x, rows))
    return x


def split(stack: Layers, x: torch.Tensor) -> torch.Tensor:
    half = x.shape[0] // 2
    a, b = x[:half], x[half:]
    for i in range(len(stack.w)):
        a = stack.mlp_phase(i, stack.attn_phase(i, a, slice(0, half)))
        b = stack.mlp_phase(i, stack.attn_phase(i, b, slice(half, 2 * half)))
    return torch.cat([a, b])


def overlap(stack: Layers, x: torch.Tensor, streams: tuple[torch.cuda.Stream, torch.cuda.Stream]) -> torch.Tensor:
    """Phase k of half A (k even: layer k // 2's attention phase, odd: its MLP phase) beside phase k - 1 of half B,
    both waiting at a barrier (each stream waits for the other's last event) before the next pair."""
    half = x.shape[0] // 2
    n = 2 * len(stack.w)
    state = {0: x[:half], 1: x[half:]}
    rows = {0: slice(0, half), 1: slice(half, 2 * half)}
    main = torch.cuda.current_stream()
    for s in streams:
        s.wait_stream(main)
    for k in range(n + 1):
        events = []
        for h, phase in ((0, k), (1, k - 1)):
            if not 0 <= phase < n:
                continue
            with torch.cuda.stream(streams[h]):
                i = phase // 2
                state[h] = stack.attn_phase(i, state[h], rows[h]) if phase % 2 == 0 else stack.mlp_phase(i, state[h])
                ev = torch.cuda.Event()
                ev.record()
                events.append((h, ev))
        for h, ev in events:  # the barrier: each stream waits for the other's phase
            streams[1 - h].wait_event(ev)
    for s in streams:
        main.wait_stream(s)
    return torch.cat([state[0], state[1]])


def hold(graph: torch.cuda.CUDAGraph, seconds: float) -> dict:
    graph.replay()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 0.5:  # settle clocks
        graph.replay()
        torch.cuda.synchronize()
    n, t0 = 0, time.perf_counter()
    with ClockSampler() as clocks:
        while time.perf_counter() - t0 < seconds:
            for _ in range(10):
                graph.replay()
            n += 10
            torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    mean = (lambda v: sum(v) / len(v) if v else None)
    return dict(ms=1e3 * wall / n, steps=n, power_w=mean(clocks.power_w), sm_mhz=mean(clocks.samples),
                capped=clocks.capped_share())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", default="256,192")
    ap.add_argument("--ctx", type=int, default=1000)
    ap.add_argument("--layers", type=int, default=28)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    results = []
    streams = (torch.cuda.Stream(), torch.cuda.Stream())
    for batch in (int(b) for b in args.batches.split(",")):
        stack = Layers(args.layers, batch, args.ctx)
        x = torch.randn(batch, H, device="cuda", dtype=torch.bfloat16)
        flop = 2 * batch * args.layers * sum(w.numel() for w in stack.w[0])
        forms = dict(serial=lambda st=stack, x=x: serial(st, x), split=lambda st=stack, x=x: split(st, x),
                     overlap=lambda st=stack, x=x: overlap(st, x, streams))
        ref = None
        for name, fn in forms.items():
            with torch.inference_mode():
                out = fn()  # compile, warm
                torch.cuda.synchronize()
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    out = fn()
            row = dict(batch=batch, ctx=args.ctx, form=name, **hold(g, args.seconds))
            g.replay()
            torch.cuda.synchronize()
            ref = out.float() if ref is None else ref
            row["rel_diff_serial"] = ((out.float() - ref).norm() / ref.norm()).item()
            row["gemm_tflops"] = flop / (row["ms"] * 1e-3) / 1e12
            print({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}, flush=True)
            results.append(row)
            del g
        del stack
        torch.cuda.empty_cache()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "overlap_probe.json").write_text(json.dumps(dict(gpu=torch.cuda.get_device_name(), results=results),
                                                       indent=1))


if __name__ == "__main__":
    main()
