"""A/B of programmatic dependent launch on whole decode-step graphs: one engine per shape, then the
bs1 / bs8 decode graphs re-captured under each PDL variant (env) and replay-timed at a 512-token context.

Usage (GPU machine, repo root): python3 benchmarks/gpu/pdl_ab.py --out $OUT [--shapes ...]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from tachyon import LLM  # noqa: E402

VARIANTS = {
    "off": {"TACHYON_PDL": "0"},
    "on": {"TACHYON_PDL": "1", "TACHYON_PDL_GEMV": "start"},
    "gemv_late": {"TACHYON_PDL": "1", "TACHYON_PDL_GEMV": "late"},
    "gemv_off": {"TACHYON_PDL": "1", "TACHYON_PDL_GEMV": "off"},
    "auto": {"TACHYON_PDL": "1", "TACHYON_PDL_GEMV": "auto"},
}


def replay_ms(g: torch.cuda.CUDAGraph, iters: int = 100) -> float:
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        g.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iters


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="out")
    ap.add_argument("--shapes", default="qwen3-0.6b", help="one engine per process: run once per shape")
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for shape in args.shapes.split(","):
        llm = LLM(shape, load_format="dummy", max_model_len=4096, max_num_batched_tokens=8192, max_num_seqs=8)
        runner = llm.engine.runner
        blocks = -(-args.context // runner.block_size)
        res = {"shape": shape, "context": args.context}
        for rnd in range(args.rounds):  # rounds interleave the variants (clock / thermal drift)
            for name, env in VARIANTS.items():
                os.environ.update(env)
                with torch.inference_mode():
                    g = runner._graph_runner()
                    g.capture([1, 8])
                    g.seq_lens.fill_(args.context)
                    g.block_tables[:, :blocks] = torch.arange(blocks, dtype=torch.int32, device=g.device)
                    g.slots.fill_(-1)
                    r = {"bs1": replay_ms(g.graphs[1]), "bs8_greedy": replay_ms(g.graphs[8])}
                    g.temperature[:8] = 0.7
                    g.top_p[:8] = 0.9
                    r["bs8_top_p"] = replay_ms(g.graphs[8])
                    g.release()
                res.setdefault(name, []).append(r)
                print(f"{shape} round {rnd} {name:10s} " + " ".join(f"{k} {v:.3f}" for k, v in r.items()), flush=True)
        results.append(res)
        (out / "pdl_ab.json").write_text(json.dumps(results, indent=1))
        del llm, runner
        torch.cuda.empty_cache()
    os.environ["TACHYON_PDL"] = "1"


if __name__ == "__main__":
    main()
