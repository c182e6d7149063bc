"""Would capturing k decode steps in one CUDA graph pay at batch 1? Replays, on one engine, the bs1 decode graph and
graphs holding k back-to-back copies of the same step (each after the first reads its input token from the previous
one's output, as a multi-step decode would; with PDL the next step's first kernels overlap the previous step's
last), at a fixed context, alternating; prints ms per step.

Usage (GPU machine, repo root): python3 benchmarks/gpu/multistep_probe.py --shape qwen3-0.6b --out $OUT
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from benchmarks.gpu.profile_step import graph_replay_ms  # noqa: E402
from tachyon import LLM, SamplingParams  # noqa: E402
from tachyon.engine.cuda_graph import capture_step  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="out")
    ap.add_argument("--shape", default="qwen3-0.6b")
    ap.add_argument("--context", type=int, default=256)
    ap.add_argument("--ks", default="1,2,4")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    llm = LLM(args.shape, load_format="dummy", max_num_batched_tokens=8192, max_num_seqs=8)
    g = llm.engine.runner.graphs
    blocks = -(-args.context // g.block_size)
    with torch.inference_mode():
        g.seq_lens.fill_(args.context)
        g.block_tables[:, :blocks] = torch.arange(blocks, dtype=torch.int32, device=g.device)
        g.slots.fill_(-1)
        g.src.fill_(0)  # input token = the previous step's output (last_tokens[0])
        graphs = {}
        pool = g.pool
        for k in (int(x) for x in args.ks.split(",")):
            def steps(k=k):
                out = None
                for _ in range(k):
                    out = g._step(1)
                return out
            graphs[k], _, pool = capture_step(steps, pool)
    res: dict = {"shape": args.shape, "context": args.context, "git": os.environ.get("TACHYON_GIT_SHA"),
                 "ms_per_step": {k: [] for k in graphs}}
    for _ in range(args.rounds):
        for k, graph in graphs.items():
            res["ms_per_step"][k].append(graph_replay_ms(graph, max(20, 200 // k)) / k)
    for k, v in res["ms_per_step"].items():
        print(f"{args.shape} ctx {args.context} k={k}: {', '.join(f'{x:.4f}' for x in v)} ms per step", flush=True)
    sp = SamplingParams(temperature=0, max_tokens=256, ignore_eos=True)  # the engine itself, for reference
    tpots = []
    for _ in range(3):
        o = llm.generate([[7] * 128], sp, use_tqdm=False)[0]
        tpots.append(1e3 * (o.metrics.finished_time - o.metrics.first_token_time) / 255)
    res["engine_tpot_ms"] = tpots
    print(f"{args.shape} engine bs1 (128-token prompt, 256 new) TPOT: {', '.join(f'{x:.4f}' for x in tpots)} ms")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"multistep_probe_{args.shape}.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
