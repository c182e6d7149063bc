"""Where a flat-shaped Qwen2.5-7B step's joules go at the board's power cap. At the cap a run's time is its energy
over ~700 W (stop 43: PDL off made the replay 11% longer and whole nano256 runs 0.3-0.4% slower), so a lever has
to remove joules, not just time. For each step (D decodes of 300-900-token contexts plus prompt chunks, as
mixed_check.schedule_mixed builds it on an fcfs engine), four pieces, each captured as a CUDA graph and held back
to back for --seconds (energy_hold.hold: ms and NVML joules per call, median power and SM clock):

  step       the engine's own mixed graph for the step (its key (D, C): every GEMM runs D + C rows)
  gemms      the 28 layers' qkv / o / gate_up / down on the engine's weights (Linear.forward, cuBLAS) at D + C rows,
             the last layer's o / gate_up / down at the D + 2 sample rows when the mixed graphs prune it
  lm_head    the logits of the D + 2 sample rows (fp32, as the graph writes them)
  attention  the step's mixed attention in each of the 28 layers' KV caches, on the graph's own staged metadata

`rest` = step - gemms - lm_head - attention: norms, rotary and the KV store, SiLU-and-mul, embedding, sampling and
launch gaps. Each piece held alone settles at its own clock under the cap (a GEMM chain lower than a whole step), so
the pieces' joules are a guide to the split, not an exact sum. The ablations measure it the other way, near the
step's own clock: the same key re-captured with one part left out (its outputs then hold stale data; timing and
energy only) and held like the step, so step - ablation is what that part costs inside the step:

  no_attention  the mixed attention (and the last layer's kept-rows attention) launched as nothing
  no_lm_head    the logits not computed (the sampler reads the stale ones)
  no_sampler    no sampling kernels

Everything alternates over --rounds; the engine's graph for the key is re-captured whole at the end.

Usage (GPU machine, repo root): python3 benchmarks/gpu/step_energy.py --out DIR [--steps 146:70+72,200:40+48]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from contextlib import ExitStack, contextmanager
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402
from clock_sampler import energy_reader  # noqa: E402  (same folder: the script folder is on sys.path)
from energy_hold import hold  # noqa: E402

from benchmarks.gpu.mixed_check import schedule_mixed  # noqa: E402
from tachyon import LLM, kernels  # noqa: E402
from tachyon.engine.batch import prune_last_layer  # noqa: E402
from tachyon.engine.mixed_graph import MAX_CHUNKS  # noqa: E402

PIECES = ("step", "gemms", "lm_head", "attention")
ABLATIONS = ("no_attention", "no_lm_head", "no_sampler")


def _no_attention(q: torch.Tensor, *args, out: torch.Tensor | None = None, **kwargs) -> torch.Tensor:
    return out if out is not None else torch.empty_like(q)


def ablation_patches(name: str, model) -> list[tuple[object, str, object]]:
    """(object, attribute, replacement) triples that leave ablation `name`'s part out of a mixed step."""
    if name == "no_attention":
        return [(kernels, "mixed_attention", _no_attention), (kernels, "attention", _no_attention)]
    if name == "no_lm_head":
        return [(model, "compute_logits", lambda hidden, out_dtype=None, out=None: out)]
    if name == "no_sampler":
        return [(kernels, "sample", lambda logits, *args, out=None, **kwargs: out)]
    raise ValueError(f"unknown ablation {name!r}; known: {', '.join(ABLATIONS)}")


@contextmanager
def patched(patches: list[tuple[object, str, object]]):
    """The attributes replaced inside the block (unittest.mock.patch.object each), restored after."""
    with ExitStack() as stack:
        for obj, attr, new in patches:
            stack.enter_context(mock.patch.object(obj, attr, new))
        yield


def capture(fn) -> torch.cuda.CUDAGraph:
    """fn run once eagerly (cuBLAS's heuristics and workspace, Triton's compile), then captured."""
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    torch.cuda.synchronize()
    return g


def piece_fns(llm: LLM, key: tuple[int, int]) -> dict:
    """gemms / lm_head / attention of a mixed step of key (D, C) whose inputs the mixed graphs have staged."""
    r = llm.engine.runner
    model, mixed = r.model, r.mixed_graphs
    d, c = key
    t, s = d + c, d + MAX_CHUNKS
    layers = list(model.layers)
    spec = model.spec
    dev, dtype = r.device, model.embed_tokens.weight.dtype  # bf16 on the GPU
    g = torch.Generator(device=dev).manual_seed(0)
    x = torch.randn(t, spec.hidden_size, device=dev, dtype=dtype, generator=g)
    a = torch.randn(t, spec.q_size, device=dev, dtype=dtype, generator=g)
    h = torch.randn(t, spec.intermediate_size, device=dev, dtype=dtype, generator=g) * 0.5
    logits = torch.empty(s, spec.vocab_size, device=dev, dtype=torch.float32)
    q = torch.randn(t, spec.num_heads, spec.head_dim, device=dev, dtype=dtype, generator=g)
    o = torch.empty_like(q)
    last_rows = s if prune_last_layer() else t
    meta = mixed._meta(d, c)  # the staged step's metadata, as the graph reads it

    def gemms() -> None:
        for i, layer in enumerate(layers):
            n = last_rows if i == len(layers) - 1 else t
            layer.self_attn.qkv_proj(x)
            layer.self_attn.o_proj(a[:n])
            layer.mlp.gate_up_proj(x[:n])
            layer.mlp.down_proj(h[:n])

    def lm_head() -> None:
        model.compute_logits(x[:s], out_dtype=torch.float32, out=logits)

    def attention() -> None:
        for layer in layers:
            layer.self_attn.attend_mixed(q, meta, o)

    return {"gemms": gemms, "lm_head": lm_head, "attention": attention}


@torch.inference_mode()
def measure(llm: LLM, decodes: int, chunks: list[int], seconds: float, rounds: int, seed: int, energy,
            held: tuple[str, ...] = PIECES + ABLATIONS) -> dict:
    """The step's pieces and ablations named in `held` ("step" always), each held at the cap over `rounds`."""
    eng, r = llm.engine, llm.engine.runner
    sched, ids = schedule_mixed(llm, decodes, chunks, None, seed)
    mixed = r.mixed_graphs
    if mixed is None or not mixed.fits(sched):
        for rid in ids:
            eng.abort(rid)
        return dict(decodes=decodes, chunks=chunks, error="the step does not fit a mixed graph")
    key = mixed.key_for(sched)
    mixed.run(sched)  # stages the step's inputs on the device; every replay below reads them
    torch.cuda.synchronize()
    graphs = {"step": mixed.graphs[key]}
    graphs.update({name: capture(fn) for name, fn in piece_fns(llm, key).items() if name in held})
    for name in (a for a in ABLATIONS if a in held):
        with patched(ablation_patches(name, r.model)):
            mixed.capture(mixed.pool, keys=[key])
        graphs[name] = mixed.graphs[key]
        mixed.run(sched)  # capture padded the staging buffers: stage the step again
    torch.cuda.synchronize()
    for _ in range(20):  # the board to its cap, as in a run
        graphs["step"].replay()
    runs = []
    for rnd in range(rounds):
        for name in graphs:
            row = dict(round=rnd, piece=name, **hold(graphs[name].replay, seconds, energy))
            runs.append(row)
            print(json.dumps(row), flush=True)
    if any(a in held for a in ABLATIONS):
        mixed.capture(mixed.pool, keys=[key])  # the engine's graph for the key, whole again
    for rid in ids:
        eng.abort(rid)
    med = {p: {k: statistics.median(x[k] for x in runs if x["piece"] == p)
               for k in ("ms_per_call", "j_per_call") if all(x[k] is not None for x in runs if x["piece"] == p)}
           for p in graphs}
    split, inside = {}, {}
    if set(graphs) == set(PIECES + ABLATIONS) and all("j_per_call" in m for m in med.values()):
        step_j = med["step"]["j_per_call"]
        rest = step_j - sum(med[p]["j_per_call"] for p in PIECES[1:])
        split = {p: round(med[p]["j_per_call"] / step_j, 3) for p in PIECES[1:]} | {"rest": round(rest / step_j, 3)}
        inside = {a.removeprefix("no_"): round((step_j - med[a]["j_per_call"]) / step_j, 3) for a in ABLATIONS}
    return dict(decodes=decodes, chunks=chunks, key=list(key), rows=sum(key), sample_rows=key[0] + MAX_CHUNKS,
                medians=med, share_of_step_j=split, share_inside_step_j=inside, runs=runs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--shape", default="qwen2.5-7b")
    ap.add_argument("--steps", default="146:70+72,200:40+48", help="decodes:chunk+chunk, comma-separated")
    ap.add_argument("--seconds", type=float, default=1.5, help="hold per piece and round")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--tag", default="", help="appended to the JSON's name")
    ap.add_argument("--pieces", default=",".join(PIECES + ABLATIONS),
                    help="what to hold besides the step (comma-separated): " + ", ".join(PIECES[1:] + ABLATIONS))
    a = ap.parse_args()
    held = ("step",) + tuple(p for p in a.pieces.split(",") if p and p != "step")
    unknown = set(held) - set(PIECES + ABLATIONS)
    if unknown:
        ap.error(f"--pieces: unknown {', '.join(sorted(unknown))}; known: {', '.join(PIECES[1:] + ABLATIONS)}")
    llm = LLM(a.shape, load_format="dummy", max_model_len=4096, max_num_batched_tokens=8192,
              overlap_scheduling=False, scheduling_policy="fcfs")
    energy = energy_reader()
    steps = []
    for i, spec in enumerate(a.steps.split(",")):
        d, rest = spec.split(":")
        row = measure(llm, int(d), [int(c) for c in rest.split("+")], a.seconds, a.rounds, seed=i, energy=energy,
                      held=held)
        print(spec, {k: row.get(k) for k in ("key", "medians", "share_of_step_j", "share_inside_step_j", "error")},
              flush=True)
        steps.append(row)
    llm.engine.check_integrity()
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / f"step_energy_{a.shape}{a.tag}.json").write_text(json.dumps(dict(
        gpu=torch.cuda.get_device_name(), torch=torch.__version__, git=os.environ.get("TACHYON_GIT_SHA", "unknown"),
        pdl=os.environ.get("TACHYON_PDL", "1"), steps=steps), indent=1))


if __name__ == "__main__":
    main()
