"""GPU check and timing of the graphed mixed step (engine/mixed_graph.py): on a dummy model of each shape, D
requests decoding and one or two new prompts make a mixed step (a pair D:C; D:C1+C2 for two prompts; D:C~K cuts the
last prompt's chunk to K tokens, short of its end). Its graph replay's logits (every request's row)
must equal the same padded step run eagerly (relative error <= 1e-3), and their distance from the plain eager step
(whose decode rows take the prefill kernel) must be no larger than 1.5x the decode graph's own distance from it on
the same rows. Both are timed (wall, synchronized, median of --reps), beside the decode graph of the D decodes.
Also records the engine's start-up phases and its number of mixed graphs. Writes mixed_check.json under --out;
exits 1 on a failure.

Usage (GPU machine, repo root): python3 benchmarks/gpu/mixed_check.py --out DIR [--shapes ...]
                                      [--steps 144:560,200:40+48,250:300~70,...]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from tachyon import LLM, SamplingParams  # noqa: E402
from tachyon.engine.batch import build_batch  # noqa: E402


def _timed(fn, reps: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3, out


def running_decodes(llm: LLM, n: int, rng: random.Random, tag: str) -> list[str]:
    """Adds n requests of 300-900 random prompt tokens (ids `tag`_i) and steps the engine until each has sampled
    once, so the next step decodes them all; returns their ids. Wants an fcfs engine: flat's row budget would spread
    the prompts over hundreds of steps, and the first would finish (max_tokens) before the last had sampled."""
    eng = llm.engine
    ids = [f"{tag}_{i}" for i in range(n)]
    for rid in ids:
        eng.add_request(rid, [rng.randrange(3, 30000) for _ in range(rng.randint(300, 900))],
                        SamplingParams(max_tokens=64, ignore_eos=True))
    while eng.scheduler.waiting or any(q.num_sampled == 0 for q in eng.scheduler.running):
        eng.step()
    return ids


def schedule_mixed(llm: LLM, decodes: int, chunks: list[int], cut: int | None, seed: int, tag: str = "m"):
    """The step of `decodes` running requests plus new prompts of the `chunks` lengths, scheduled; `cut` shortens the
    last chunk (short of its prompt's end; its blocks cover more: harmless). Returns (SchedulerOutput, request ids)."""
    eng = llm.engine
    rng = random.Random(seed)
    ids = running_decodes(llm, decodes, rng, f"{tag}{seed}")
    for j, chunk in enumerate(chunks):
        eng.add_request(f"{tag}c{seed}_{j}", [rng.randrange(3, 30000) for _ in range(chunk)],
                        SamplingParams(max_tokens=4))
        ids.append(f"{tag}c{seed}_{j}")
    sched = eng.scheduler.schedule()
    if cut is not None:
        sched.num_new_tokens[-1] = cut
    return sched, ids


@torch.inference_mode()
def check_step(llm: LLM, decodes: int, chunks: list[int], cut: int | None, reps: int, seed: int) -> dict:
    eng, r = llm.engine, llm.engine.runner
    sched, ids = schedule_mixed(llm, decodes, chunks, cut, seed)
    mixed = r.mixed_graphs
    row = dict(decodes=decodes, chunks=chunks, cut=cut, num_new_tokens_tail=sched.num_new_tokens[-3:])
    if mixed is None or not mixed.fits(sched):
        row["error"] = "the step does not fit a mixed graph"
        for rid in ids:
            eng.abort(rid)
        return row
    row["key"] = list(mixed.key_for(sched))
    graph_ms, (logits, tokens) = _timed(lambda: mixed.run(sched), reps)
    logits, tokens = logits.clone(), tokens.clone()
    mixed.use_graphs = False  # the same padded step, its kernels launched eagerly
    padded = mixed.run(sched)[0].clone()
    mixed.use_graphs = True

    def eager():
        batch = build_batch(sched, r.block_size, r.device)
        hidden = r.model(batch.input_ids, batch.positions, batch.meta)
        return r.model.compute_logits(hidden[batch.logits_rows]).float()

    eager_ms, ref = _timed(eager, reps)
    # the eager step has logits only for the requests that sample (a cut chunk does not)
    sampling = [i for i, (q, n) in enumerate(zip(sched.requests, sched.num_new_tokens))
                if q.num_computed_tokens + n == q.num_tokens]
    logits, tokens, padded = logits[sampling], tokens[sampling], padded[sampling]
    decode_ms, (dec_logits, _) = _timed(lambda: r.graphs.run(sched.requests[:decodes], [-1] * decodes), reps)

    def rel(a, b):
        return ((a - b).norm() / b.norm()).item()

    in_vocab = bool(((tokens >= 0) & (tokens < ref.shape[1])).all())
    # the oracle: the eager run of the same padded step (same kernels: ~bit-identical); the plain eager step takes
    # other kernels for the decode rows (the prefill kernel), so its distance is compared with the decode graph's
    # own distance from it on the same rows (what bf16 rounding through every layer gives for the same change)
    row.update(graph_ms=graph_ms, eager_ms=eager_ms, decode_graph_ms=decode_ms,
               rel_err_padded_eager=rel(logits, padded), rel_err_eager=rel(logits, ref),
               rel_err_eager_decode_rows=rel(logits[:decodes], ref[:decodes]),
               decode_graph_rel_err_eager=rel(dec_logits.float(), ref[:decodes]),
               argmax_agree_eager=(logits.argmax(-1) == ref.argmax(-1)).float().mean().item(),
               nan=bool(torch.isnan(logits).any()), tokens_in_vocab=in_vocab)
    row["ok"] = (row["rel_err_padded_eager"] <= 1e-3 and not row["nan"] and in_vocab
                 and row["rel_err_eager_decode_rows"] <= 1.5 * row["decode_graph_rel_err_eager"] + 1e-3)
    for rid in ids:
        eng.abort(rid)
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--shapes", default="qwen3-0.6b,qwen2.5-7b")
    ap.add_argument("--steps", default="8:200,144:560,144:1000,250:300,200:40+48,130:300~70,250:30+200~20",
                    help="decodes:chunk pairs (module docstring)")
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results, ok = [], True
    for shape in args.shapes.split(","):
        t0 = time.perf_counter()
        llm = LLM(shape, load_format="dummy", max_model_len=4096, max_num_batched_tokens=8192, overlap_scheduling=False,
                  scheduling_policy="fcfs")
        startup = time.perf_counter() - t0
        r = llm.engine.runner
        entry = dict(shape=shape, startup_s=startup, phases=llm.engine.startup,
                     mixed_graphs=len(r.mixed_graphs.graphs) if r.mixed_graphs is not None else 0,
                     kv_blocks=llm.engine.pool.num_blocks, profile={k: v for k, v in r.profile.items() if k != "gemv"},
                     steps=[])
        print(f"{shape}: start-up {startup:.1f} s {llm.engine.startup}, {entry['mixed_graphs']} mixed graphs",
              flush=True)
        for i, pair in enumerate(args.steps.split(",")):
            d, rest = pair.split(":")
            rest, _, cut = rest.partition("~")
            row = check_step(llm, int(d), [int(c) for c in rest.split("+")], int(cut) if cut else None, args.reps,
                             seed=i)
            print(f"  {row}", flush=True)
            ok = ok and row.get("ok", False)
            entry["steps"].append(row)
        llm.engine.check_integrity()
        results.append(entry)
        del llm, r
        torch.cuda.empty_cache()
    (out / "mixed_check.json").write_text(json.dumps(dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__,
                                                          results=results), indent=1))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
