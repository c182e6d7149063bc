"""Sampling kernel on the GPU: graph-timed `sample_triton` at B in (1, 8, 256), V = 152064, for flat
(dummy-weight-like) and peaked logits under greedy / temperature / top-p 0.9 / top-k 50 + top-p + min-p,
each checked against the full-sort kept set.

Usage (GPU machine, repo root): python3 benchmarks/kernels/sample_timing.py --out $OUT
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from timing import env, graph_time_us  # noqa: E402

from tachyon.kernels import sampling  # noqa: E402
from tachyon.kernels.sampling import sample_triton  # noqa: E402

V = 152064
MODES = {"greedy": (0.0, 0, 1.0, 0.0), "temperature": (0.8, 0, 1.0, 0.0), "top_p0.9": (0.7, 0, 0.9, 0.0),
         "k50_p0.9_minp0.05": (1.0, 50, 0.9, 0.05)}


def kept(logits: torch.Tensor, T: float, k: int, p: float, mp: float) -> torch.Tensor:
    """[B, V] bool: the kept set by a float64 full sort (ties at a threshold kept)."""
    s = logits.double() / max(T, 1e-5)
    vals, _ = s.sort(dim=-1, descending=True)
    thr = torch.full((s.shape[0],), float("-inf"), dtype=torch.float64, device=s.device)
    if 0 < k < V:
        thr = vals[:, k - 1]
    probs = torch.softmax(torch.where(vals >= thr[:, None], vals, float("-inf")), -1)
    if p < 1.0:
        cut = ((probs.cumsum(-1) - probs) < p).sum(-1) - 1
        thr = torch.maximum(thr, vals.gather(1, cut[:, None]).squeeze(1))
    keep = s >= thr[:, None]
    if mp > 0:
        keep &= s >= vals[:, :1] + torch.log(torch.tensor(mp, dtype=torch.float64))
    return keep


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="out")
    ap.add_argument("--batches", default="1,8,256")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--variants", default="", help="A/B of the sampler's knobs, e.g. 'HIST_BINS=512,PROGRAMS_PER_SM=2;"
                                                   "HIST_BINS=1024' (module constants of kernels/sampling.py)")
    args = ap.parse_args()
    rows = []
    defaults = dict(HIST_BINS=sampling.HIST_BINS, PROGRAMS_PER_SM=sampling.PROGRAMS_PER_SM,
                    FAST_RACES=sampling.FAST_RACES)
    for variant in args.variants.split(";"):
        knobs = dict(defaults)
        knobs.update({k: int(v) for k, v in (kv.split("=") for kv in variant.split(",") if kv)})
        for k, v in knobs.items():
            setattr(sampling, k, v)
        rows += _run([int(b) for b in args.batches.split(",")], args.modes.split(","), knobs)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "sample_timing.json").write_text(json.dumps(dict(env=env(Path(__file__).resolve().parents[2]),
                                                            rows=rows), indent=1))


def _run(batches: list[int], modes: list[str], knobs: dict) -> list[dict]:
    gen = torch.Generator(device="cuda").manual_seed(0)
    rows = []
    for B in batches:
        for shape, scale in (("flat", 0.05), ("peaked", 3.0)):
            logits = torch.randn(B, V, device="cuda", generator=gen) * scale
            for mode in modes:
                T, k, p, mp = MODES[mode]
                prm = dict(temperature=torch.full((B,), T, device="cuda"),
                           top_k=torch.full((B,), k, dtype=torch.int32, device="cuda"),
                           top_p=torch.full((B,), p, device="cuda"), min_p=torch.full((B,), mp, device="cuda"),
                           seeds=torch.arange(B, device="cuda"), steps=torch.full((B,), 3, device="cuda"))
                tok = sample_triton(logits, **prm)
                if mode == "greedy":
                    ok = bool(torch.equal(tok, logits.argmax(-1)))
                else:
                    ok = bool(kept(logits, T, k, p, mp).gather(1, tok[:, None]).all())
                us = graph_time_us(lambda logits=logits, prm=prm: sample_triton(logits, **prm))
                rows.append(dict(B=B, logits=shape, mode=mode, graph_us=us, ok=ok, **knobs))
                print(f"{knobs} B={B:4d} {shape:6s} {mode:18s} {us:8.1f} us  ok={ok}", flush=True)
    return rows


if __name__ == "__main__":
    main()
