"""The engine's own `flat` schedule of a workload, on the CPU: the real `Scheduler` (tachyon/engine/scheduler.py)
with the mixed graphs' `tight_chunk` as its `chunk_fit`, every request forced to its max_tokens, no model run. Prints
how many steps of each kind and GEMM-row count it makes, and their cost under two models of the H200 7B step, so a
fill (TACHYON_FLAT_ROWS, TACHYON_FLAT_QUANTUM, TACHYON_FLAT_DEADLINE, TACHYON_MIXED_CHUNK_BUCKETS) can be compared
before a GPU run:

  stairs  stop 44's: mixed steps at the measured cost of their row count (128 decodes, 300-900-token contexts, held
          at the cap), decode-only steps at stop 27's per-bucket costs. Blind to where the decodes' KV reads fall:
          on nano256 it gives stop 43's fill (R 288, q 1, chunk buckets every 64) 9.12 s and stop 44's (R 300, q 128)
          8.78 s, 3.7% less, where the GPU measured about 6% less over two A/Bs on two boards (session37/).
  kv      a step's cost apart from its attention by GEMM rows (4.45 ms up to 128 rows: stop 45's decode-step traces
          less their attention; above, the same stairs less 1.3 ms of attention), plus its decodes' KV bytes at
          3.4 TB/s. For fills that move decodes between steps (the deadline R).

Steps: "mixed" (decodes + at most two chunks that a mixed graph holds: rows = its key's decode bucket + chunk
bucket), "decode" (decodes alone: rows = the decode graphs' bucket), "prefill" (anything else, eager: rows = its
tokens; 22 us a token in both models).

Usage: python3 benchmarks/flat_schedule.py [--workload PATH] [--rows 288,300] [--quantum 1,128] [--deadline 0,1]
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import os
from pathlib import Path

import numpy as np

from tachyon import SamplingParams
from tachyon.engine.cuda_graph import bucket_sizes
from tachyon.engine.kv_cache import BlockPool, KVCacheManager
from tachyon.engine.mixed_graph import DECODE_BUCKETS, MAX_CHUNKS, MixedGraphRunner, _buckets, chunk_bucket_sizes
from tachyon.engine.request import Request, RequestStatus
from tachyon.engine.scheduler import Scheduler

# ms per step at the cap, Qwen2.5-7B, H200: mixed graphs of 128 decodes + a chunk (session37/call2_s44b_49010d1/),
# decode-only steps by bucket (session20/timeline20_ad31fbc/); prefill steps: 22 us a prompt token (stop 27)
MIXED_MS = ((224, 7.78), (256, 7.96), (288, 8.93), (320, 9.53), (352, 10.2), (384, 10.37), (416, 11.88),
            (448, 12.24))
DECODE_MS = ((1, 3.73), (32, 5.06), (64, 5.91), (128, 7.22), (192, 8.88), (256, 10.53))


def mixed_ms(rows: int) -> float:
    """A stair: a step costs what the measured size at or above it costs (past 448: +12.24 ms per 448 rows)."""
    for r, ms in MIXED_MS:
        if rows <= r:
            return ms
    return MIXED_MS[-1][1] * rows / MIXED_MS[-1][0]


def decode_ms(rows: int) -> float:
    xs, ys = zip(*DECODE_MS)
    return float(np.interp(rows, xs, ys))


# ms of a step apart from its attention, by GEMM rows (the kv model)
REST_MS = ((128, 4.45),) + tuple((r, ms - 1.3) for r, ms in MIXED_MS if r > 128)
KV_BYTES_PER_TOKEN = 28 * 2 * 4 * 128 * 2  # Qwen2.5-7B: layers x (K, V) x KV heads x head dim x bf16
KV_BYTES_PER_MS = 3.4e9


def rest_ms(rows: int) -> float:
    for r, ms in REST_MS:
        if rows <= r:
            return ms
    return REST_MS[-1][1] * rows / REST_MS[-1][0]


def mixed_keys(max_decodes: int, max_chunk: int) -> MixedGraphRunner:
    """A MixedGraphRunner holding only its bucket lists (no model, no buffers): enough for tight_chunk and keys."""
    m = MixedGraphRunner.__new__(MixedGraphRunner)
    m.decode_buckets = _buckets(DECODE_BUCKETS, max_decodes)
    m.chunk_buckets = _buckets(chunk_bucket_sizes(), max_chunk)
    m.max_decodes, m.max_chunk = max_decodes, max_chunk
    return m


def schedule(requests: list[dict], max_decodes: int = 256, max_chunk: int = 1024, budget: int = 8192,
             blocks: int = 124861, enable_caching: bool = False) -> list[tuple[str, int, int, int]]:
    """(kind, tokens, GEMM rows, keys its decodes read) of every step flat makes over `requests` (the workload's
    JSON entries). Reads the TACHYON_FLAT_* and TACHYON_MIXED_CHUNK_BUCKETS knobs as the engine does. With
    `enable_caching`, prefix caching hashes and registers blocks after each step, as the engine does."""
    kv = KVCacheManager(BlockPool(blocks, 16), enable_caching=enable_caching)
    s = Scheduler(kv, max_num_seqs=512, max_num_batched_tokens=budget, policy="flat")
    m = mixed_keys(max_decodes, max_chunk)
    s.chunk_fit = m.tight_chunk
    for i, r in enumerate(requests):
        s.add(Request(str(i), r["prompt_token_ids"], SamplingParams(max_tokens=r["max_tokens"], ignore_eos=True),
                      eos_token_ids=[], max_model_len=1 << 20, sample_seed=i))
    graph_buckets, steps = bucket_sizes(), []
    while s.num_unfinished:
        out = s.schedule()
        if not out.requests:
            raise RuntimeError("the scheduler made an empty step with requests unfinished")
        d = sum(1 for q, n in zip(out.requests, out.num_new_tokens) if not m.is_chunk(q, n))
        chunks, tokens = len(out.requests) - d, out.total_tokens
        if not chunks:
            kind, rows = "decode", next((b for b in graph_buckets if b >= d), d)
        elif d and chunks <= MAX_CHUNKS and tokens - d <= m.capacity(d):
            dpad = m.decode_bucket(d)
            kind, rows = "mixed", dpad + next(c for c in m.chunk_buckets if dpad + c - d >= tokens - d)
        else:
            kind, rows = "prefill", tokens
        keys = sum(q.num_computed_tokens + 1 for q, n in zip(out.requests, out.num_new_tokens) if not m.is_chunk(q, n))
        steps.append((kind, tokens, rows, keys))
        for q, n in zip(out.requests, out.num_new_tokens):
            q.num_computed_tokens += n
            if q.num_computed_tokens >= q.num_tokens:
                q.append_token(7)
        kv.cache_blocks(out.requests)
        for q in out.requests:
            if q.num_output_tokens >= q.max_tokens and q.status == RequestStatus.RUNNING:
                s.finish(q, RequestStatus.FINISHED_LENGTH)
    return steps


def cost_s(steps: list[tuple[str, int, int, int]]) -> float:
    """The stairs model's seconds."""
    ms = {"mixed": mixed_ms, "decode": decode_ms, "prefill": lambda rows: 0.022 * rows}
    return sum(ms[kind](rows) for kind, _, rows, _ in steps) / 1e3


def kv_cost_s(steps: list[tuple[str, int, int, int]]) -> float:
    """The kv model's seconds."""
    return sum((0.022 * rows if kind == "prefill" else rest_ms(rows)) + keys * KV_BYTES_PER_TOKEN / KV_BYTES_PER_MS
               for kind, _, rows, keys in steps) / 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    root = Path(__file__).resolve().parents[1]
    ap.add_argument("--workload", default=str(root / "tachyon" / "bench" / "workloads" / "nano256.json"))
    ap.add_argument("--rows", default="288,300,320", help="FLAT_MIN_ROWS values to try")
    ap.add_argument("--quantum", default="1,128", help="FLAT_ROW_QUANTUM values to try")
    ap.add_argument("--deadline", default="0", help="TACHYON_FLAT_DEADLINE values to try (0, 1)")
    args = ap.parse_args()
    requests = json.loads(Path(args.workload).read_text())["requests"]
    out_tokens = sum(r["max_tokens"] for r in requests)
    for d, q, r in itertools.product(args.deadline.split(","), [int(x) for x in args.quantum.split(",")],
                                     [int(x) for x in args.rows.split(",")]):
        os.environ.update(TACHYON_FLAT_ROWS=str(r), TACHYON_FLAT_QUANTUM=str(q), TACHYON_FLAT_DEADLINE=d)
        steps = schedule(requests)
        kinds = collections.Counter(k for k, *_ in steps)
        top = collections.Counter(rows for k, _, rows, _ in steps if k == "mixed").most_common(4)
        tail = [rows for k, _, rows, _ in steps if k == "decode"]
        t, tk = cost_s(steps), kv_cost_s(steps)
        print(f"deadline {d} R {r} q {q}: {len(steps)} steps {dict(kinds)}; mixed rows (most common) {top}; "
              f"decode-only rows {sum(tail) / max(len(tail), 1):.0f} on average; stairs model {t:.2f} s "
              f"({out_tokens / t:,.0f} tok/s), kv model {tk:.2f} s ({out_tokens / tk:,.0f} tok/s)")


if __name__ == "__main__":
    main()
