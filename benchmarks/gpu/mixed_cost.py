"""Where a graphed mixed step's extra time goes: for each D:C pair (D running decodes, one or two prompt chunks; the
same forms as mixed_check.py), the mixed graph's replay beside the decode graph of the D decodes alone, the decode
graph of D + C decodes (the same GEMM rows, only decodes; when D + C fits a decode bucket), and a per-kernel device
time breakdown of the mixed replay (torch.profiler; the kernels' summed time and the GPU's busy time, which differ
where kernels overlap: a kernel launched early through PDL counts its wait).

TACHYON_MIXED_COST_SKIP_CHUNK=1 captures every graph with the chunks' attention left out (the decode rows' attention
still runs): the replay's drop against a normal process is the chunk attention's real cost. It acts on the two-
launch form only (TACHYON_MIXED_ATTN=two; the default one-launch form runs both parts in one kernel, which it leaves
alone). Timing only: that process's logits are wrong.

Usage (GPU machine, repo root): python3 benchmarks/gpu/mixed_cost.py --out DIR [--shape qwen2.5-7b]
                                      [--steps 200:40+48,144:88,...] [--tag NAME]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from benchmarks.gpu.mixed_check import check_step, running_decodes, schedule_mixed  # noqa: E402
from benchmarks.gpu.step_timeline import gpu_busy  # noqa: E402
from tachyon import LLM  # noqa: E402


def _skip_chunk_attention() -> None:
    """Makes `kernels.attention` skip the calls that write into a given output with queries longer than one token
    (the chunks' part of a mixed step): timing probes only."""
    from tachyon import kernels

    real = kernels.attention

    def attention(q, kv_cache, qsl, seq_lens, bt, max_query_len, max_seq_len, scale, out=None, num_kv_splits=0):
        if max_query_len > 1 and out is not None:
            return out
        return real(q, kv_cache, qsl, seq_lens, bt, max_query_len, max_seq_len, scale, out=out,
                    num_kv_splits=num_kv_splits)

    kernels.attention = attention


def _replay_ms(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


@torch.inference_mode()
def decode_only_ms(llm: LLM, decodes: int, reps: int, seed: int) -> float | None:
    """The decode graph's replay time for `decodes` running requests (300-900-token contexts, as check_step's)."""
    eng, r = llm.engine, llm.engine.runner
    if r.graphs is None or decodes > r.graphs.max_bs:
        return None
    ids = running_decodes(llm, decodes, random.Random(seed), f"d{seed}")
    reqs = eng.scheduler.schedule().requests  # every one a decode row, its next slot allocated
    ms = _replay_ms(lambda: r.graphs.run(reqs, [-1] * len(reqs)), reps)
    for rid in ids:
        eng.abort(rid)
    return ms


@torch.inference_mode()
def profile_mixed(llm: LLM, decodes: int, chunks: list[int], cut: int | None, seed: int) -> dict:
    """Kernel breakdown of 4 replays of one mixed step."""
    eng, r = llm.engine, llm.engine.runner
    sched, ids = schedule_mixed(llm, decodes, chunks, cut, seed, tag="p")
    mixed = r.mixed_graphs
    out: dict = {}
    if mixed is not None and mixed.fits(sched):
        for _ in range(3):
            mixed.run(sched)
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(4):
                mixed.run(sched)
            torch.cuda.synchronize()
        out = gpu_busy(prof, 4)
    for rid in ids:
        eng.abort(rid)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--shape", default="qwen2.5-7b")
    ap.add_argument("--steps", default="200:40+48,200:88,144:88,130:300~70,250:30+200~20,64:192,128:128")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--tag", default=os.environ.get("TACHYON_MIXED_COST_TAG", "default"))
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    skip = os.environ.get("TACHYON_MIXED_COST_SKIP_CHUNK") == "1"
    if skip:
        _skip_chunk_attention()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    llm = LLM(args.shape, load_format="dummy", max_model_len=4096, max_num_batched_tokens=8192,
              overlap_scheduling=False, scheduling_policy="fcfs")
    rows = []
    for i, pair in enumerate(args.steps.split(",")):
        d, rest = pair.split(":")
        rest, _, cut = rest.partition("~")
        chunks = [int(c) for c in rest.split("+")]
        try:
            row = check_step(llm, int(d), chunks, int(cut) if cut else None, args.reps, seed=i)
            tokens = int(cut) + sum(chunks[:-1]) if cut else sum(chunks)
            row["decode_same_rows_ms"] = decode_only_ms(llm, int(d) + tokens, args.reps, seed=100 + i)
            if args.profile:
                row["profile"] = profile_mixed(llm, int(d), chunks, int(cut) if cut else None, seed=200 + i)
        except Exception:  # noqa: BLE001 - a probe: record and go on to the next step
            traceback.print_exc()
            row = dict(decodes=int(d), chunks=chunks, error=traceback.format_exc()[-2000:])
            for req in list(llm.engine.scheduler.running) + list(llm.engine.scheduler.waiting):
                llm.engine.abort(req.request_id)
        keep = ("decodes", "chunks", "cut", "key", "graph_ms", "decode_graph_ms", "decode_same_rows_ms", "ok")
        print(args.tag, {k: row.get(k) for k in keep}, flush=True)
        rows.append(row)
    llm.engine.check_integrity()
    (out / f"mixed_cost_{args.shape}_{args.tag}.json").write_text(json.dumps(dict(
        gpu=torch.cuda.get_device_name(), torch=torch.__version__, tag=args.tag, skip_chunk_attention=skip,
        pdl=os.environ.get("TACHYON_PDL", "1"), git=os.environ.get("TACHYON_GIT_SHA", "unknown"), rows=rows),
        indent=1))


if __name__ == "__main__":
    main()
