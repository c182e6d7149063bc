"""Whole decode steps (model forward + logits + sampling) as CUDA graphs, one per batch-size bucket.

Contract: the graphs read only from static device buffers owned here and write logits and tokens
into static outputs; `run` fills the inputs for a decode-only batch (every request has exactly one
new token), pads the batch to its bucket (padding rows store to slot -1 and are discarded) and
replays. All host inputs of a step travel in one pinned staging region, one copy (block tables: only
the bucket's rows); two such regions alternate so filling step N+1 never races the upload of N.
Graphs bake in the KV-cache tensors' addresses: capture after the cache is allocated, never free it.
Buckets up to UNFILTERED_MAX_BATCH also have a twin graph whose sampler launches only the kernels that greedy
and unfiltered rows need (kernels.sample(unfiltered=True)); `run` replays it when every request's sampling
parameters allow (sampling.row_is_unfiltered), for the same tokens a few microseconds sooner.
"""

from __future__ import annotations

import os

import numpy as np
import torch

from tachyon import kernels
from tachyon.engine.batch import AttentionMetadata, longest_first
from tachyon.engine.request import Request
from tachyon.engine.staging import StagingBuffers
from tachyon.kernels.attention_config import decode_graph_order
from tachyon.kernels.sampling import row_is_unfiltered

# every 16 rows from 64 to 256: a padding row costs a real row's GEMM FLOPs in the power-capped large-batch
# steps (H200, Qwen2.5-7B nano256: 12,790.7 / 12,806.4 tok/s with 32-row steps, 12,889.9 / 12,928.9 with these,
# alternating; benchmarks/results/session13/mid13_727031f/). 8-row steps gave 12,966.4 but a warm start-up of
# 6.26 s against 4.27-4.32 (same call; likely new kernel specializations for sizes not a multiple of 16)
BUCKETS = (1, 2, 4, 8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256, 320, 384, 448,
           512)
# buckets up to this size prefetch each layer's o_proj / MLP weights into L2 during its attention
# (models/prefetch.py), TACHYON_L2_PREFETCH_MB of them per layer (read at capture; 0: off)
L2_PREFETCH_MAX_BATCH = 16
L2_PREFETCH_MB = 0
# buckets up to this size get the unfiltered-sampling twin graph: it skips four sampler launches (H200, Qwen3-0.6B
# batch 1: TPOT 0.661 -> 0.652 ms, benchmarks/results/prefill_session10/final10a_3e95489/gaps_*); at large
# batches the step is long and the twin not worth its capture
UNFILTERED_MAX_BATCH = 8


def env_buckets(var: str, default: tuple[int, ...]) -> tuple[int, ...]:
    """`default`, or the comma-separated sizes in environment variable `var` (an A/B knob), sorted, each >= 1."""
    env = os.environ.get(var)
    if not env:
        return default
    try:
        sizes = {int(b) for b in env.split(",")}
    except ValueError:
        raise ValueError(f"{var} must be comma-separated integers >= 1, got {env!r}") from None
    if min(sizes) < 1:
        raise ValueError(f"{var} must be comma-separated integers >= 1, got {env!r}")
    return tuple(sorted(sizes))


def bucket_sizes() -> tuple[int, ...]:
    """The decode graphs' batch sizes: BUCKETS, or TACHYON_DECODE_BUCKETS."""
    return env_buckets("TACHYON_DECODE_BUCKETS", BUCKETS)


# captures that needed the step run eagerly first (capture_step; read as a delta for the start-up detail)
CAPTURE_COUNTS = {"eager_runs": 0}


def _eager_first() -> bool:
    """TACHYON_CAPTURE_EAGER_FIRST=1 (an A/B knob): run every step once eagerly before capturing it."""
    return os.environ.get("TACHYON_CAPTURE_EAGER_FIRST", "0") == "1"


def _capture(step, pool):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, pool=pool):
        out = step()
    return g, out, pool if pool is not None else g.pool()


def capture_step(step, pool, eager_first: bool = False):
    """Capture `step()` into a CUDA graph in memory pool `pool` (None: a new one); returns (graph, step's output,
    the pool). The step is captured directly when everything it launches is ready (the warm-up's compile pass
    compiled and loaded its Triton kernels); if it launches something that needs an eager run first
    (NeedsEagerRun: a Triton module still to load, a buffer still to grow), that capture is discarded and the
    step runs once eagerly, then is captured again. The step must not change state outside the tensors it
    writes (a discarded capture wrote none). `eager_first` (or TACHYON_CAPTURE_EAGER_FIRST=1, or a Triton whose
    module loads cannot be guarded): always run it eagerly first."""
    from tachyon.kernels.module_loads import NeedsEagerRun, guard_available, loads_raise_in_capture

    if not (eager_first or _eager_first()) and guard_available():
        try:
            with loads_raise_in_capture():
                return _capture(step, pool)
        except NeedsEagerRun:
            torch.cuda.synchronize()
    CAPTURE_COUNTS["eager_runs"] += 1
    step()
    torch.cuda.synchronize()
    return _capture(step, pool)


class DecodeGraphRunner:
    def __init__(self, model: torch.nn.Module, *, max_batch: int, max_model_len: int, block_size: int,
                 vocab_size: int, device: torch.device, last_tokens: torch.Tensor):
        self.model = model
        self.last_tokens = last_tokens  # [>= max_batch] int64, shared with the runner (overlap feed)
        self.device = device
        self.block_size = block_size
        self.max_model_len = max_model_len
        self.buckets = [b for b in bucket_sizes() if b < max_batch] + [max_batch]
        self.max_bs = max_batch
        self.max_blocks = -(-max_model_len // block_size)
        B, MB = self.max_bs, self.max_blocks
        # every per-step input travels in one copy (block tables last: only the bucket's rows travel)
        i64, i32, f32 = torch.int64, torch.int32, torch.float32
        self.staging = StagingBuffers(
            [(n, i64, (B,)) for n in ("input_ids", "positions", "slots", "seeds", "steps", "src")]
            + [(n, i32, (B,)) for n in ("seq_lens", "top_k", "decode_order")]
            + [(n, f32, (B,)) for n in ("temperature", "top_p", "min_p")]
            + [("block_tables", i32, (B, MB))], device)
        dev = self.staging.device
        self.input_ids, self.positions, self.slots = dev["input_ids"], dev["positions"], dev["slots"]
        self.seeds, self.steps, self.src = dev["seeds"], dev["steps"], dev["src"]
        self.seq_lens, self.top_k = dev["seq_lens"], dev["top_k"]
        self.temperature, self.top_p, self.min_p = dev["temperature"], dev["top_p"], dev["min_p"]
        self.block_tables = dev["block_tables"]
        # the buckets whose graphs hand the decode kernel their sequences longest first (attention_config.
        # decode_graph_order: by default those whose unsplit launch holds several waves of programs)
        kv_heads = model.spec.num_kv_heads
        self.ordered_buckets = {b for b in self.buckets if decode_graph_order(b, kv_heads, device)}
        self.decode_order = dev["decode_order"]
        self.query_start_loc = torch.arange(B + 1, dtype=torch.int32, device=device)
        self.vocab_size = vocab_size
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.outputs: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        # the unfiltered-sampling twins (buckets <= UNFILTERED_MAX_BATCH), same inputs and outputs' meaning
        self.unfiltered_graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.unfiltered_outputs: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self.pool = None

    def _meta(self, bs: int) -> AttentionMetadata:
        # max_seq_len = max_model_len: the kernels' launch shape must cover any context length
        return AttentionMetadata(self.query_start_loc[: bs + 1], self.seq_lens[:bs], self.slots[:bs],
                                 self.block_tables[:bs], 1, self.max_model_len, True,
                                 order=self.decode_order[:bs] if self._ordered(bs) else None)

    def _ordered(self, bs: int) -> bool:
        """Whether bucket `bs`'s graph hands the decode kernel a longest-first order."""
        return bs in self.ordered_buckets

    def _step(self, bs: int, unfiltered: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """One decode step on the static buffers: (logits [bs, V] fp32, tokens = last_tokens[:bs]). A row whose
        input token is still on the device (src >= 0) reads it from the last step's output (one embed_step
        kernel); the sampler writes the tokens straight into last_tokens, the next step's source.
        `unfiltered`: every row is greedy or unfiltered (the sampler's reduced launch)."""
        x = kernels.embed_step(self.model.embed_tokens.weight, self.input_ids[:bs], self.src[:bs], self.last_tokens)
        prefetcher = getattr(self.model, "prefetcher", None)
        if prefetcher is not None and bs <= L2_PREFETCH_MAX_BATCH:
            prefetcher.budget_bytes = int(float(os.environ.get("TACHYON_L2_PREFETCH_MB", L2_PREFETCH_MB)) * 2**20)
        try:
            hidden = self.model(None, self.positions[:bs], self._meta(bs), inputs_embeds=x)
        finally:
            if prefetcher is not None:
                prefetcher.budget_bytes = 0
        logits = self.model.compute_logits(hidden, out_dtype=torch.float32)
        tokens = kernels.sample(logits, self.temperature[:bs], self.top_k[:bs], self.top_p[:bs], self.min_p[:bs],
                                self.seeds[:bs], self.steps[:bs], out=self.last_tokens[:bs], unfiltered=unfiltered)
        return logits, tokens

    @torch.inference_mode()
    def capture(self, buckets: list[int] | None = None, eager_first: bool = False) -> None:
        """Capture the given (default: all) buckets, largest first, in one shared memory pool (capture_step;
        `eager_first`: each after an eager run)."""
        self.pad_inputs()
        for bs in sorted(buckets or self.buckets, reverse=True):
            self.graphs[bs], self.outputs[bs], self.pool = capture_step(lambda bs=bs: self._step(bs), self.pool,
                                                                        eager_first)
            if self.has_twin(bs):
                self.unfiltered_graphs[bs], self.unfiltered_outputs[bs], _ = capture_step(
                    lambda bs=bs: self._step(bs, unfiltered=True), self.pool, eager_first)
        torch.cuda.synchronize()

    @staticmethod
    def has_twin(bs: int) -> bool:
        """Whether bucket `bs` gets an unfiltered-sampling twin graph (TACHYON_UNFILTERED_GRAPHS=0, an A/B knob:
        none)."""
        return bs <= UNFILTERED_MAX_BATCH and os.environ.get("TACHYON_UNFILTERED_GRAPHS", "1") != "0"

    def output_bytes(self, buckets: list[int] | None = None) -> int:
        """Pool bytes that the graphs of `buckets` (default: all) and their twins keep past capture: each one's fp32
        logits output stays allocated, so no later capture reuses it (what the memory profile must add for the
        buckets it does not capture)."""
        rows = sum(b * (2 if self.has_twin(b) else 1) for b in (buckets if buckets is not None else self.buckets))
        return rows * self.vocab_size * 4

    def pad_inputs(self) -> None:
        """Every row a padding row (both staging sets, uploaded): what capture and compile passes run on."""
        for _ in range(2):
            h = self.staging.host()
            self._fill_padding(h, 0, self.max_bs)
            h["decode_order"][:] = np.arange(self.max_bs)  # a permutation for every bucket's capture
            self._upload(self.max_bs)
        torch.cuda.synchronize()

    def release(self) -> None:
        for d in (self.graphs, self.outputs, self.unfiltered_graphs, self.unfiltered_outputs):
            d.clear()
        self.pool = None

    def bucket_for(self, bs: int) -> int | None:
        for b in self.buckets:
            if b >= bs and b in self.graphs:
                return b
        return None

    @staticmethod
    def _fill_padding(h: dict, start: int, end: int) -> None:
        """Padding rows [start, end) of host set `h`: store nothing, attend to one key, greedy."""
        if start >= end:
            return
        for name in ("input_ids", "positions", "seeds", "steps", "top_k", "temperature", "min_p"):
            h[name][start:end] = 0
        h["slots"][start:end] = -1  # slot -1: padding rows store nothing
        h["src"][start:end] = -1
        h["seq_lens"][start:end] = 1  # seq_len 1: padding rows attend to one (garbage) key, harmlessly
        h["top_p"][start:end] = 1.0
        h["block_tables"][start:end, 0] = 0

    def _upload(self, rows: int) -> None:
        """One copy of the current host set (block-table rows [0, rows) only), then flip sets. The copy
        is stream-ordered after the previous replay, which may still be reading the inputs."""
        self.staging.upload_rows("block_tables", rows)

    def run(self, reqs: list[Request], src_rows: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """Replay the decode step for `reqs` (each with exactly one uncomputed token and its blocks).
        `src_rows[i] >= 0`: request i's input token is the previous step's output at that row.
        Returns (logits [bs, V] fp32, tokens [bs] int64) on the device, valid until the next run: the tokens
        are a view of the shared last_tokens buffer, which the next step (graphed or not) overwrites."""
        bs = len(reqs)
        bucket = self.bucket_for(bs)
        bsz = self.block_size
        h = self.staging.host()
        ids, pos_, slots = h["input_ids"], h["positions"], h["slots"]
        seeds, steps, src = h["seeds"], h["steps"], h["src"]
        seq_lens, top_k, temp, top_p, min_p = (h[n] for n in ("seq_lens", "top_k", "temperature", "top_p", "min_p"))
        tables = h["block_tables"]
        unfiltered = bucket in self.unfiltered_graphs
        for i, r in enumerate(reqs):
            pos = r.num_tokens - 1
            p = r.params
            ids[i] = r.token_ids[pos]
            pos_[i] = pos
            slots[i] = r.block_ids[pos // bsz] * bsz + pos % bsz
            seeds[i] = r.sample_seed
            steps[i] = r.num_sampled
            src[i] = src_rows[i]
            seq_lens[i] = pos + 1
            top_k[i] = p.top_k
            tables[i, : len(r.block_ids)] = r.block_ids
            temp[i] = p.temperature
            top_p[i] = p.top_p
            min_p[i] = p.min_p
            if unfiltered:
                unfiltered = row_is_unfiltered(p.temperature, p.top_k, p.top_p, p.min_p, self.vocab_size)
        self._fill_padding(h, bs, bucket)  # padding rows are greedy
        if self._ordered(bucket):  # the padding rows (one key each) sort last
            h["decode_order"][:bucket] = longest_first(h["seq_lens"][:bucket])
        self._upload(bucket)
        if unfiltered:
            self.unfiltered_graphs[bucket].replay()
            logits, tokens = self.unfiltered_outputs[bucket]
        else:
            self.graphs[bucket].replay()
            logits, tokens = self.outputs[bucket]
        return logits[:bs], tokens[:bs]
