"""What does one more row cost a Qwen2.5-7B step's GEMMs, around the sizes the flat schedule fills its steps to?
Captures the 28 layers of qkv / o / gate_up / down (cuBLAS through torch.mm, F.linear's weight layout, weights
N(0, 0.02) as the dummy loader draws them) at each row count as one CUDA graph, replays it for `--seconds` with the
board at its power cap, and reports ms per chain, us and mJ per row (NVML energy), median power and SM clock, and
the GEMM kernels cuBLAS picked (their names carry the tile shape). Row counts alternate over `--rounds`.

Usage (GPU machine, repo root): python3 benchmarks/gpu/gemm_rows.py --rows 192,224,256,288,320,384 --out $OUT/g.json
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch
from clock_sampler import energy_reader  # same folder (the script folder is on sys.path)
from energy_hold import hold
from schedule_power import HIDDEN, INTER, LAYERS, QKV


def chain(rows: int, layers, x: torch.Tensor, h: torch.Tensor, outs) -> None:
    for wq, wo, wgu, wd in layers:
        torch.mm(x[:rows], wq, out=outs[0][:rows])
        torch.mm(x[:rows], wo, out=outs[1][:rows])
        torch.mm(x[:rows], wgu, out=outs[2][:rows])
        torch.mm(h[:rows], wd, out=outs[3][:rows])


def kernel_names(fn) -> list[str]:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names = {e.key for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA}
    return sorted(names)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default="192,224,256,272,288,320,352,384,448,512")
    ap.add_argument("--seconds", type=float, default=1.5, help="replay time per row count and round")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    rows = [int(r) for r in a.rows.split(",")]
    dev, bf = "cuda", torch.bfloat16
    g = torch.Generator(device=dev).manual_seed(0)

    def w(n: int, k: int) -> torch.Tensor:
        return (torch.randn(n, k, device=dev, dtype=bf, generator=g) * 0.02).t()

    layers = [(w(QKV, HIDDEN), w(HIDDEN, HIDDEN), w(2 * INTER, HIDDEN), w(HIDDEN, INTER)) for _ in range(LAYERS)]
    m = max(rows)
    x = torch.randn(m, HIDDEN, device=dev, dtype=bf, generator=g)
    h = torch.randn(m, INTER, device=dev, dtype=bf, generator=g) * 0.5
    outs = [torch.empty(m, n, device=dev, dtype=bf) for n in (QKV, HIDDEN, 2 * INTER, HIDDEN)]
    graphs, kernels = {}, {}
    for r in rows:
        chain(r, layers, x, h, outs)  # cuBLAS's heuristics and workspace, outside the capture
        torch.cuda.synchronize()
        kernels[r] = kernel_names(lambda r=r: chain(r, layers[:1], x, h, outs))
        gr = torch.cuda.CUDAGraph()
        with torch.cuda.graph(gr):
            chain(r, layers, x, h, outs)
        graphs[r] = gr
    energy = energy_reader()
    for _ in range(20):  # bring the board to its power cap, as the engine's run is
        graphs[rows[-1]].replay()
    torch.cuda.synchronize()
    results = []
    for rnd in range(a.rounds):
        for r in rows:
            held = hold(graphs[r].replay, a.seconds, energy)
            ms, j = held.pop("ms_per_call"), held.pop("j_per_call")
            row = {"round": rnd, "rows": r, "chains": held.pop("calls"), "ms_per_chain": ms, "us_per_row": ms * 1e3 / r,
                   "mj_per_row": j * 1e3 / r if j is not None else None, **held}
            results.append(row)
            print(json.dumps(row), flush=True)
    with open(a.out, "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "kernels": kernels,
                   "runs": results}, f, indent=1)
    print("rows | ms per chain | us per row | mJ per row | median W | median MHz | kernels")
    for r in rows:
        rs = [x for x in results if x["rows"] == r]
        ms = statistics.median(x["ms_per_chain"] for x in rs)
        mj = [x["mj_per_row"] for x in rs if x["mj_per_row"] is not None]
        print(f"{r} | {ms:.3f} | {ms * 1e3 / r:.2f} | {statistics.median(mj) if mj else float('nan'):.3f} | "
              f"{rs[-1]['power_w_median']} | {rs[-1]['sm_mhz_median']} | {' ; '.join(k[:60] for k in kernels[r])}")


if __name__ == "__main__":
    main()
