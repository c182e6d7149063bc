"""Whole decode steps (model forward + logits + sampling) as CUDA graphs, one per batch-size bucket.

Contract: the graphs read only from static device buffers owned here and write logits and tokens
into static outputs; `run` fills the inputs for a decode-only batch (every request has exactly one
new token), pads the batch to its bucket (padding rows store to slot -1 and are discarded) and
replays. All host inputs of a step travel in four pinned staging buffers, one copy each (block
tables: only the bucket's rows); two such sets alternate so filling step N+1 never races the upload of N.
Graphs bake in the KV-cache tensors' addresses: capture after the cache is allocated, never free it.
"""

from __future__ import annotations

import torch

from tachyon import kernels
from tachyon.engine.batch import AttentionMetadata
from tachyon.engine.request import Request

BUCKETS = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 224, 256, 320, 384, 448, 512)


class DecodeGraphRunner:
    def __init__(self, model: torch.nn.Module, *, max_batch: int, max_model_len: int, block_size: int,
                 vocab_size: int, device: torch.device, last_tokens: torch.Tensor):
        self.model = model
        self.last_tokens = last_tokens  # [>= max_batch] int64, shared with the runner (overlap feed)
        self.device = device
        self.block_size = block_size
        self.max_model_len = max_model_len
        self.buckets = [b for b in BUCKETS if b < max_batch] + [max_batch]
        self.max_bs = max_batch
        self.max_blocks = -(-max_model_len // block_size)
        B, MB = self.max_bs, self.max_blocks
        # staging: two pinned host sets, used alternately, each uploaded by one copy per buffer.
        # i64 = ids | positions | slots | seeds | steps | src ; i32 = seq_lens | top_k ; f32 = temp | top_p | min_p;
        # tables [B, MB] row-major, so a bucket's rows are one contiguous prefix (only those travel)
        self._host = [self._new_host_set() for _ in range(2)]
        self._host_np = [tuple(t.numpy() for t in h) for h in self._host]  # views, for per-row writes
        self._host_free = [torch.cuda.Event(), torch.cuda.Event()]  # recorded after each set's upload
        self._set = 0
        self._i64 = torch.zeros(6 * B, dtype=torch.int64, device=device)
        self._i32 = torch.zeros(2 * B, dtype=torch.int32, device=device)
        self._f32 = torch.zeros(3 * B, dtype=torch.float32, device=device)
        self.block_tables = torch.zeros(B, MB, dtype=torch.int32, device=device)
        self.input_ids, self.positions, self.slots, self.seeds, self.steps, self.src = self._i64.view(6, B)
        self.seq_lens, self.top_k = self._i32.view(2, B)
        self.temperature, self.top_p, self.min_p = self._f32.view(3, B)
        self.query_start_loc = torch.arange(B + 1, dtype=torch.int32, device=device)
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.outputs: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self.pool = None

    def _new_host_set(self) -> tuple[torch.Tensor, ...]:
        B, MB = self.max_bs, self.max_blocks
        return (torch.zeros(6 * B, dtype=torch.int64, pin_memory=True),
                torch.zeros(2 * B, dtype=torch.int32, pin_memory=True),
                torch.zeros(3 * B, dtype=torch.float32, pin_memory=True),
                torch.zeros(B, MB, dtype=torch.int32, pin_memory=True))

    def _meta(self, bs: int) -> AttentionMetadata:
        # max_seq_len = max_model_len: the kernels' launch shape must cover any context length
        return AttentionMetadata(self.query_start_loc[: bs + 1], self.seq_lens[:bs], self.slots[:bs],
                                 self.block_tables[:bs], 1, self.max_model_len, True)

    def _step(self, bs: int) -> tuple[torch.Tensor, torch.Tensor]:
        # a row whose input token is still on the device (src >= 0) reads it from the last step's output
        src = self.src[:bs]
        ids = torch.where(src >= 0, self.last_tokens[src.clamp(min=0)], self.input_ids[:bs])
        hidden = self.model(ids, self.positions[:bs], self._meta(bs))
        logits = self.model.compute_logits(hidden).float()
        tokens = kernels.sample(logits, self.temperature[:bs], self.top_k[:bs], self.top_p[:bs], self.min_p[:bs],
                                self.seeds[:bs], self.steps[:bs])
        self.last_tokens[:bs].copy_(tokens)
        return logits, tokens

    @torch.inference_mode()
    def capture(self, buckets: list[int] | None = None) -> None:
        """Capture the given (default: all) buckets, largest first, in one shared memory pool."""
        self.pad_inputs()
        for bs in sorted(buckets or self.buckets, reverse=True):
            self._step(bs)  # warm-up: compiles kernels, settles the allocator
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=self.pool):
                self.outputs[bs] = self._step(bs)
            if self.pool is None:
                self.pool = g.pool()
            self.graphs[bs] = g
        torch.cuda.synchronize()

    def pad_inputs(self) -> None:
        """Every row a padding row (both staging sets, uploaded): what capture and compile passes run on."""
        for _ in range(2):
            self._fill_padding(0, self.max_bs)
            self._upload(self.max_bs)
        torch.cuda.synchronize()

    def release(self) -> None:
        self.graphs.clear()
        self.outputs.clear()
        self.pool = None

    def bucket_for(self, bs: int) -> int | None:
        for b in self.buckets:
            if b >= bs and b in self.graphs:
                return b
        return None

    def _fill_padding(self, start: int, end: int) -> None:
        """Padding rows [start, end) of the current host set: store nothing, attend to one key, greedy."""
        if start >= end:
            return
        B = self.max_bs
        i64, i32, f32, tables = self._host_np[self._set]
        for k in range(5):
            i64[k * B + start: k * B + end] = 0
        i64[2 * B + start: 2 * B + end] = -1  # slot -1: padding rows store nothing
        i64[5 * B + start: 5 * B + end] = -1
        i32[start:end] = 1  # seq_len 1: padding rows attend to one (garbage) key, harmlessly
        i32[B + start: B + end] = 0
        tables[start:end, 0] = 0
        f32[start:end] = 0.0
        f32[B + start: B + end] = 1.0
        f32[2 * B + start: 2 * B + end] = 0.0

    def _upload(self, rows: int) -> None:
        """Copy the current host set to the device (table rows [0, rows) only), then flip sets. The
        copies are stream-ordered after the previous replay, which may still be reading the inputs."""
        i64, i32, f32, tables = self._host[self._set]
        self._i64.copy_(i64, non_blocking=True)
        self._i32.copy_(i32, non_blocking=True)
        self._f32.copy_(f32, non_blocking=True)
        self.block_tables[:rows].copy_(tables[:rows], non_blocking=True)
        self._host_free[self._set].record()
        self._set ^= 1

    def _host_set(self) -> tuple:
        """The host set to fill next, once its previous upload has finished (normally long ago)."""
        self._host_free[self._set].synchronize()  # returns at once if never recorded
        return self._host_np[self._set]

    def run(self, reqs: list[Request], src_rows: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """Replay the decode step for `reqs` (each with exactly one uncomputed token and its blocks).
        `src_rows[i] >= 0`: request i's input token is the previous step's output at that row.
        Returns (logits [bs, V] fp32, tokens [bs] int64) on the device, valid until the next run."""
        bs = len(reqs)
        bucket = self.bucket_for(bs)
        B, bsz = self.max_bs, self.block_size
        i64, i32, f32, tables = self._host_set()
        for i, r in enumerate(reqs):
            pos = r.num_tokens - 1
            p = r.params
            i64[i] = r.token_ids[pos]
            i64[B + i] = pos
            i64[2 * B + i] = r.block_ids[pos // bsz] * bsz + pos % bsz
            i64[3 * B + i] = r.sample_seed
            i64[4 * B + i] = r.num_sampled
            i64[5 * B + i] = src_rows[i]
            i32[i] = pos + 1
            i32[B + i] = p.top_k
            tables[i, : len(r.block_ids)] = r.block_ids
            f32[i] = p.temperature
            f32[B + i] = p.top_p
            f32[2 * B + i] = p.min_p
        self._fill_padding(bs, bucket)
        self._upload(bucket)
        self.graphs[bucket].replay()
        logits, tokens = self.outputs[bucket]
        return logits[:bs], tokens[:bs]
