"""Is Qwen3-0.6B bs1's slow mode (~2% slower steps for a whole process) set by where the engine's buffers land?
Builds the acceptance engine (the bench's Tachyon backend) once per pad, each time after holding a pad of P MiB
(or KiB) on the device at one point of the start-up (--site), so what is allocated after it lands elsewhere; times
batch-1 runs on each build with bs1_steps.one_run (median step gap per run) and records the base addresses of the
first weight, the first layer's KV cache and the batch-1 graph's output. --qsl-large / --arena move named small
buffers to fixed offsets of one 2 MiB block first; --snapshot dumps every live block of chosen builds; --raw takes
the pads from the driver's cuMemAlloc; --own-pool loads each build into a fresh MemPool; --hf-first runs
transformers in the process first.

If the mode follows the pad (the same pads slow in two processes, others fast), placement sets it; if a process
stays in one mode across every build, it is a state of the process, not of its buffers.

Usage (GPU): python benchmarks/gpu/layout_probe.py --pads 0,1,2,3,5,8,64,1024 --runs 4 --out out.json
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import statistics
from pathlib import Path

import torch
from bs1_steps import PhaseTimer, one_run  # same folder (the script folder is on sys.path)

from tachyon.bench.backends import BackendOptions, get_backend
from tachyon.bench.offline import warmup_workload
from tachyon.bench.workloads import load_workload


def first_ptr(obj) -> int | None:
    """data_ptr of the first tensor found in obj (a tensor, or nested lists / tuples / dicts of them)."""
    if isinstance(obj, torch.Tensor):
        return obj.data_ptr()
    items = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else ()
    for x in items:
        p = first_ptr(x)
        if p is not None:
            return p
    return None


def addresses(engine) -> dict:
    runner = engine.runner
    graphs = getattr(runner, "graphs", None)
    out = {"weight": next(runner.model.parameters()).data_ptr(),
           "kv_cache": first_ptr(getattr(runner, "kv_caches", None))}
    if graphs is not None and 1 in getattr(graphs, "outputs", {}):
        out["graph_bs1_output"] = first_ptr(graphs.outputs[1])
    return {k: (None if v is None else hex(v)) for k, v in out.items()}


_PADS: list[torch.Tensor] = []  # pads placed inside the start-up (freed after each build)
_MOVED: list[torch.Tensor] = []  # the pinned buffers' blocks and the tensors they replaced (kept: graphs read them)

# pad site: (module, class, method, whether the pad comes before or after its next call)
SITES = {
    "tokens": ("tachyon.engine.runner", "Sampler", "__init__", "after"),  # built right before the token buffer
    "graphs": ("tachyon.engine.cuda_graph", "DecodeGraphRunner", "__init__", "before"),
    "capture": ("tachyon.engine.cuda_graph", "DecodeGraphRunner", "capture", "before"),
    "after": ("tachyon.engine.cuda_graph", "DecodeGraphRunner", "capture", "after"),
    "prefill": ("tachyon.engine.prefill_graph", "PrefillGraphRunner", "__init__", "after"),
}


def hook(cls: type, name: str, fn, when: str, once: bool) -> None:
    """Run fn(self) before or after calls of cls.name: the next one only (then the method is restored), or all."""
    own = name in cls.__dict__
    orig = cls.__dict__.get(name)
    method = getattr(cls, name)

    def hooked(self, *args, **kw):
        if once and own:
            setattr(cls, name, orig)
        elif once:
            delattr(cls, name)
        if when == "before":
            fn(self)
        out = method(self, *args, **kw)
        if when == "after":
            fn(self)
        return out

    setattr(cls, name, hooked)


class RawPad:
    """nbytes held by the driver's own cuMemAlloc (a mapping outside torch's caching allocator), freed on close."""

    def __init__(self, nbytes: int):
        import ctypes

        torch.cuda.synchronize()  # the primary context current on this thread, with no allocation of torch's
        self._cuda = ctypes.CDLL("libcuda.so.1")
        ptr = ctypes.c_uint64()
        rc = self._cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(nbytes))
        if rc:
            raise RuntimeError(f"cuMemAlloc_v2({nbytes}) returned {rc}")
        self.ptr = ptr.value

    def data_ptr(self) -> int:
        return self.ptr

    def close(self) -> None:
        if self.ptr:
            import ctypes

            torch.cuda.synchronize()
            self._cuda.cuMemFree_v2(ctypes.c_uint64(self.ptr))
            self.ptr = 0


def new_pad(nbytes: int, raw: bool) -> torch.Tensor | RawPad:
    return RawPad(nbytes) if raw else torch.empty(nbytes, dtype=torch.uint8, device="cuda")


def place_pad(site: str, nbytes: int, raw: bool) -> torch.Tensor | RawPad | None:
    """A pad of nbytes held on the device now (site "load", returned) or at the next call of its SITES method
    (held in _PADS). Site "ready" is placed by main after the load."""
    if not nbytes or site == "ready":
        return None
    if site == "load":
        return new_pad(nbytes, raw)
    import importlib

    mod, cls, name, when = SITES[site]
    hook(getattr(importlib.import_module(mod), cls), name,
         lambda _self: _PADS.append(new_pad(nbytes, raw)), when, once=True)
    return None


def pin_small_buffers(qsl_only: bool) -> None:
    """Every DecodeGraphRunner built from now on, before its capture, moves the per-step small buffers to fixed
    offsets of one 2 MiB block: its query_start_loc to offset 0 and, unless qsl_only, the split-KV counters to
    64 KiB and the model's norm weights from 128 KiB (each 512-byte aligned)."""
    import tachyon.engine.cuda_graph as cg
    from tachyon.kernels import _triton

    def pin(runner) -> None:
        dev = runner.query_start_loc.device
        arena = torch.zeros(2 << 20, dtype=torch.uint8, device=dev)
        _MOVED.append(arena)

        def take(off: int, t: torch.Tensor) -> torch.Tensor:
            view = arena[off: off + t.numel() * t.element_size()].view(t.dtype).view(t.shape)
            view.copy_(t)
            _MOVED.append(t)
            return view

        runner.query_start_loc = take(0, runner.query_start_loc)
        if qsl_only:
            return
        bufs = _triton._COUNTERS.setdefault(str(dev), [])
        need = bufs[-1].numel() if bufs else 4096
        bufs.append(take(64 << 10, torch.zeros(need, dtype=torch.int32, device=dev)))
        off = 128 << 10
        for name, prm in runner.model.named_parameters():
            if name.endswith("norm.weight"):
                prm.data = take(off, prm.data)
                off += -(-prm.numel() * prm.element_size() // 512) * 512
        assert off <= 2 << 20, off

    hook(cg.DecodeGraphRunner, "__init__", pin, "after", once=False)


def dump_blocks(path: Path) -> None:
    """Every live block of the caching allocator: address, size, pool (small / large / a graph pool) and the
    allocating Python frames inside tachyon (needs _record_memory_history on before the allocations)."""
    blocks = []
    for seg in torch.cuda.memory._snapshot()["segments"]:
        for blk in seg["blocks"]:
            if blk["state"] != "active_allocated":
                continue
            frames = [f"{f['filename'].split('tachyon/')[-1]}:{f['line']} {f['name']}" for f in blk.get("frames", [])
                      if "tachyon/" in f["filename"]][:4]
            blocks.append({"address": blk["address"], "size": blk["size"], "segment_type": seg["segment_type"],
                           "segment": seg["address"], "pool": str(seg.get("segment_pool_id")), "frames": frames})
    path.write_text(json.dumps(blocks))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen3-0.6b")
    ap.add_argument("--pads", default="0,1,2,3,5,8,64,1024", help="MiB held on the device before each build")
    ap.add_argument("--kib", action="store_true", help="--pads are KiB, not MiB (<= 1 MiB: the small pool)")
    ap.add_argument("--site", default="load",
                    choices=["load", "tokens", "graphs", "capture", "after", "prefill", "ready"],
                    help="where the pad is allocated: before the engine's load (moves every later allocation); before "
                    "the runner's device token buffer (moves it, the prefill staging, the decode graphs' small "
                    "buffers, the split-KV counters); before the decode graph runner (its small buffers and what "
                    "follows); before the decode graphs' capture (their pool's segments, when the pad needs a new "
                    "one); right after that capture (the prefill runner's staging and later); after the prefill "
                    "runner's staging, before its capture; once the engine is built (what the warm-up and the runs "
                    "allocate)")
    ap.add_argument("--no-prefill-graphs", action="store_true", help="engine built with prefill_graph_max_tokens=0")
    ap.add_argument("--qsl-large", action="store_true",
                    help="the decode graphs' query_start_loc (2.5 KB, small pool) moved to the start of a 2 MiB block "
                    "(large pool) before capture (--arena's first move alone)")
    ap.add_argument("--arena", action="store_true",
                    help="before capture, move query_start_loc (offset 0), the split-KV counters (64 KiB) and every "
                    "norm weight (from 128 KiB) into one 2 MiB block of the large pool (fixed offsets in it)")
    ap.add_argument("--snapshot", default="", help="comma list of pads whose build dumps every live device block "
                    "(address, size, pool, allocating frames) under --out's folder")
    ap.add_argument("--raw", action="store_true", help="pads come from the driver's cuMemAlloc (a mapping of their "
                    "own, outside torch's caching allocator)")
    ap.add_argument("--own-pool", action="store_true", help="each build's load (weights, KV cache, graph capture) "
                    "allocates into a fresh torch.cuda.MemPool, so the process's earlier blocks cannot shift its own")
    ap.add_argument("--hf-first", action="store_true", help="before the builds, load transformers' model of the same "
                    "shape, run the bs1 warm-up through it (32 tokens) and close it, as `bench offline --backend "
                    "hf,tachyon` does")
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    wl = load_workload("bs1")
    req = wl.requests[0]
    builds = []
    unit, shift = ("KiB", 10) if a.kib else ("MiB", 20)
    if a.qsl_large or a.arena:
        pin_small_buffers(qsl_only=not a.arena)
    snap_pads = {int(p) for p in a.snapshot.split(",") if p}
    if a.hf_first:
        hf = get_backend("hf", BackendOptions(model=a.model, dummy=True))
        hf.load()
        hf.run(warmup_workload(wl, max_tokens=32, num_requests=1))
        hf.close()
        del hf
        gc.collect()
    for k, pad_n in enumerate(int(p) for p in a.pads.split(",")):
        pad = place_pad(a.site, pad_n << shift, a.raw)
        if pad_n in snap_pads:
            torch.cuda.memory._record_memory_history(stacks="python", max_entries=200_000)
        engine_args = {"prefill_graph_max_tokens": 0} if a.no_prefill_graphs else {}
        backend = get_backend("tachyon", BackendOptions(model=a.model, dummy=True, engine_args=engine_args))
        pool = torch.cuda.MemPool() if a.own_pool else None  # held until the build is closed
        with torch.cuda.use_mem_pool(pool) if pool is not None else contextlib.nullcontext():
            backend.load()
        if a.site == "ready" and pad_n:
            pad = new_pad(pad_n << shift, a.raw)
        if pad_n in snap_pads:
            dump_blocks(Path(a.out).with_name(f"blocks_{pad_n}{unit}_{Path(a.out).stem}.json"))
            torch.cuda.memory._record_memory_history(enabled=None)
        backend.run(warmup_workload(wl))
        engine = backend.llm.engine
        timer = PhaseTimer(engine)
        gaps = [one_run(engine, list(req.prompt_token_ids), req.max_tokens, f"b{k}r{i}", timer)["median_gap_ms"]
                for i in range(a.runs)]
        b = {"pad": pad_n, "unit": unit, "median_gap_ms": gaps, "median": statistics.median(gaps),
             "site": a.site, "raw": a.raw, "own_pool": a.own_pool, "hf_first": a.hf_first,
             "pad_ptr": hex((pad if pad is not None else _PADS[-1]).data_ptr()) if pad_n else None,
             **addresses(engine)}
        builds.append(b)
        print(f"pad {pad_n:5d} {unit}: median step {b['median']:.4f} ms (runs {', '.join(f'{g:.4f}' for g in gaps)}) "
              f"weight {b['weight']} kv {b['kv_cache']} graph {b.get('graph_bs1_output')}", flush=True)
        backend.close()
        for p in [pad, *_PADS]:
            if isinstance(p, RawPad):
                p.close()
        del backend, engine, timer, pad, pool
        _PADS.clear()
        gc.collect()
        torch.cuda.empty_cache()
    with open(a.out, "w") as fh:
        json.dump({"model": a.model, "builds": builds}, fh, indent=1)


if __name__ == "__main__":
    main()
