"""Mixed steps (running decodes plus one or two prompt chunks) as CUDA graphs, one per (decode bucket, chunk bucket).

Why: a request admitted beside running decodes makes a mixed step. Eager, it launches ~15 kernels per layer
from Python: on a slow host a 7B mixed step of a few hundred prompt tokens is bound by those launches (20-55 ms
on the H200's host, against ~7 ms for a graphed decode step), and every running request waits for it. A replay
costs one launch.

Layout of a padded step of key (D, C) with d real decode rows: rows [0, d) are the decode rows, one per sequence;
the chunks' tokens follow at once, from row d (the first chunk's, then the second's), and padding tokens that belong
to no sequence and store nothing fill the rows up to D + C. So a step holds up to D + C - d chunk tokens: the decode
bucket's padding rows carry prompt tokens instead of garbage (`capacity`). Attention covers two parts, the D decode
sequences (rows [0, D): sequences [d, D) are padding) and the MAX_CHUNKS chunk sequences (an absent chunk has no
query rows), into one output: by default in one launch, which skips the padding decode sequences
(kernels.mixed_attention); with TACHYON_MIXED_ATTN=two the decode kernel first (its padding sequences attend to one
garbage key), then the prefill kernel, which overwrites the rows from d on that the decode part wrote as padding.
Sample rows: one per request in the step's order (decode rows, then each chunk's last token), then greedy padding
rows (row 0); `keep_seq` maps each to its sequence (padding rows: sequence 0). The last layer stores every row's K/V
but runs its attention output path and MLP on the sample rows only (the model's `keep`), unless
TACHYON_PRUNE_LAST_LAYER=0 at capture (graphs) or at the step (eager).

Contract: `fits(sched)` says whether a step can replay a graph: its requests are d >= 1 decodes (one token each, at
its last position), then one or two chunks of prompt tokens (`is_chunk`), d <= max_decodes, the chunks' tokens fit
`capacity(d)`, and no request wants prompt logprobs. `run(sched, src_rows)` fills, uploads and replays; it returns
the logits and drawn token of each request's last scheduled token ([n, V] fp32, [n] int64 on the device, valid
until the next run), whether or not a chunk's request samples this step (a chunk short of its prompt's end draws a
token nobody reads). `src_rows[i] >= 0`: decode request i's input token is still on the device, at that row of
`last_tokens` (overlap scheduling). The drawn tokens are written into the first rows of `last_tokens` (int64, at
least max_decodes + MAX_CHUNKS long; the runner's overlap feed). The graphs read only the staging buffers owned here
and the KV cache bound to the model: capture after the cache is allocated, never free it. Without graphs
(`use_graphs=False`, or a non-CUDA device) `run` executes the same padded step eagerly, which is what CPU tests
check.
"""

from __future__ import annotations

import os

import numpy as np
import torch

from tachyon import kernels
from tachyon.engine.batch import AttentionMetadata, KeptRows, longest_first, prune_last_layer
from tachyon.engine.cuda_graph import env_buckets
from tachyon.engine.scheduler import SchedulerOutput
from tachyon.engine.staging import StagingBuffers
from tachyon.engine.step_graphs import StepGraphs
from tachyon.kernels.attention_config import mixed_decode_order

# coarser than the decode graphs' buckets: a mixed step already carries the chunk's rows, so a few padding decode
# rows cost little, and every (decode, chunk) pair is a graph to capture at start-up. The chunk's buckets are fine:
# a padding token costs a real token's GEMM FLOPs, and with power-of-two buckets a 560-token prompt beside 144
# decodes ran as 1,184 rows (H200, Qwen2.5-7B: 29.9 ms, the eager step 23.2; benchmarks/results/session21/)
# no bucket under 32: beside chunks in multiples of 32 a step then totals a multiple of 128 rows as the flat fill
# aims (8 decode rows beside a 256-token chunk made 264, past the GEMMs' 256-row stair)
DECODE_BUCKETS = (32, 64, 96, 128, 160, 192, 224, 256)
# every 32 rows to 512: beside a decode bucket that is an odd multiple of 32 a step can still total a multiple of 64
# or 128 rows, which the flat fill aims for (scheduler.FLAT_ROW_QUANTUM)
CHUNK_BUCKETS = tuple(range(32, 513, 32)) + (640, 768, 896, 1024)
# a step's chunk sequences: the end of one prompt and the start of the next, so a scheduler that fills a step to
# its capacity (the "flat" policy) pads only at a workload's last prompt
MAX_CHUNKS = 2


def _buckets(candidates: tuple[int, ...], limit: int) -> list[int]:
    return [b for b in candidates if b < limit] + [limit]


def chunk_bucket_sizes() -> tuple[int, ...]:
    """The mixed graphs' chunk buckets: CHUNK_BUCKETS, or TACHYON_MIXED_CHUNK_BUCKETS (comma-separated, an A/B
    knob)."""
    return env_buckets("TACHYON_MIXED_CHUNK_BUCKETS", CHUNK_BUCKETS)


class MixedGraphRunner(StepGraphs):
    def __init__(self, model: torch.nn.Module, *, max_decodes: int, max_chunk: int, max_model_len: int,
                 block_size: int, vocab_size: int, device: torch.device, last_tokens: torch.Tensor,
                 use_graphs: bool = True):
        if max_decodes < 1 or max_chunk < 2:
            raise ValueError(f"mixed graphs need max_decodes >= 1 and max_chunk >= 2, got {max_decodes}, {max_chunk}")
        super().__init__(model, max_model_len=max_model_len, block_size=block_size, device=device,
                         last_tokens=last_tokens, sample_rows=max_decodes + MAX_CHUNKS, use_graphs=use_graphs)
        self.decode_buckets = _buckets(DECODE_BUCKETS, max_decodes)
        self.chunk_buckets = _buckets(chunk_bucket_sizes(), max_chunk)
        self.max_decodes, self.max_chunk = max_decodes, max_chunk
        T, S, MB = max_decodes + max_chunk, max_decodes + MAX_CHUNKS, -(-max_model_len // block_size)
        i64, i32, f32 = torch.int64, torch.int32, torch.float32
        # sequences: decode rows 0..D-1, the chunks at D, D+1 (seq_lens, block_tables); sample rows: one per request
        # (rows: its token row, keep_seq: its sequence)
        self.staging = StagingBuffers(
            [(n, i64, (T,)) for n in ("input_ids", "positions", "slots", "src")]
            + [(n, i64, (S,)) for n in ("rows", "keep_seq", "seeds", "steps")]
            + [("chunk_qsl", i32, (MAX_CHUNKS + 1,)), ("decode_order", i32, (max_decodes,))]
            + [(n, i32, (S,)) for n in ("seq_lens", "top_k")]
            + [(n, f32, (S,)) for n in ("temperature", "top_p", "min_p")]
            + [("block_tables", i32, (S, MB))], device)
        self.buf = self.staging.device
        # the decode part's sequences longest first for the one-launch attention (attention_config.mixed_decode_order)
        self.order_decodes = mixed_decode_order()
        # the decode part's query_start_loc and the kept rows' (one per sample row)
        self.decode_qsl = torch.arange(S + 1, dtype=i32, device=device)
        # one logits buffer for every graph (a graph's own output would stay allocated per key)
        self.logits = torch.zeros(S, vocab_size, dtype=f32, device=device)

    @property
    def keys(self) -> list[tuple[int, int]]:
        return [(d, c) for d in self.decode_buckets for c in self.chunk_buckets]

    def compile_keys(self) -> list[tuple[int, int]]:
        """The keys whose steps the warm-up's compile pass runs: every chunk bucket beside the largest decode bucket
        and every decode bucket beside the largest chunk bucket (the two-launch attention's launch choices follow
        one side each; the one-launch mixed attention has one variant per dtype and head layout, which any key
        compiles). A variant this cross misses compiles at capture instead, and that key's capture needs an eager run
        first (engine/cuda_graph.capture_step): correct, only slower to start (H200, 7B cold: 21.9 s against 21.7 with
        every key compiled in parallel, when every capture ran eagerly first; benchmarks/results/session21/).
        TACHYON_MIXED_COMPILE_KEYS=all compiles every key."""
        if os.environ.get("TACHYON_MIXED_COMPILE_KEYS") == "all":  # an A/B knob: every key
            return self.keys
        d, c = self.decode_buckets[-1], self.chunk_buckets[-1]
        return sorted({(d, x) for x in self.chunk_buckets} | {(x, c) for x in self.decode_buckets})

    # ---- eligibility and buckets --------------------------------------------------------------
    @staticmethod
    def is_chunk(req, n: int) -> bool:
        """A scheduled piece of prompt, not a decode row (one token at the request's last position)."""
        return n != 1 or req.num_computed_tokens != req.num_tokens - 1

    def decode_bucket(self, d: int) -> int:
        return next(b for b in self.decode_buckets if b >= d)

    def capacity(self, d: int) -> int:
        """Most chunk tokens a step with d (1..max_decodes) decode rows can hold."""
        return self.decode_bucket(d) + self.max_chunk - d

    def tight_chunk(self, d: int, want: int) -> int:
        """The chunk-token count nearest `want` (ties: the larger) that fills a key beside d decode rows with no
        padding: decode_bucket(d) + C - d for a chunk bucket C. `want` itself when d is out of range or `want` is
        past the capacity (that step runs eagerly, or pads)."""
        if not 1 <= d <= self.max_decodes or want > self.capacity(d):
            return want
        base = self.decode_bucket(d) - d
        return min((base + c for c in self.chunk_buckets), key=lambda n: (abs(n - want), -n))

    def fits(self, sched: SchedulerOutput) -> bool:
        reqs, n = sched.requests, sched.num_new_tokens
        d = self.num_decodes(sched)
        if not 1 <= d <= self.max_decodes or not 1 <= len(reqs) - d <= MAX_CHUNKS or sum(n[d:]) > self.capacity(d):
            return False
        if any(self.is_chunk(r, k) for r, k in zip(reqs[:d], n[:d])):  # a chunk before a decode row
            return False
        return not any(r.wants_prompt_logprobs() for r in reqs)

    @staticmethod
    def num_decodes(sched: SchedulerOutput) -> int:
        """Decode rows of a step that `fits`: every request but its trailing chunks."""
        reqs, n = sched.requests, sched.num_new_tokens
        d = len(reqs)
        while d > 0 and MixedGraphRunner.is_chunk(reqs[d - 1], n[d - 1]):
            d -= 1
        return d

    def key_for(self, sched: SchedulerOutput) -> tuple[int, int]:
        d = self.num_decodes(sched)
        dpad, tokens = self.decode_bucket(d), sum(sched.num_new_tokens[d:])
        return dpad, next(c for c in self.chunk_buckets if dpad + c - d >= tokens)

    # ---- the step -----------------------------------------------------------------------------
    def _meta(self, d: int, c: int) -> AttentionMetadata:
        """Key (d, c)'s two attention parts (module docstring): the decode part over rows and sequences [0, d), the
        chunk part over sequences [d, d + MAX_CHUNKS) whose rows chunk_qsl places anywhere in [0, d + c)."""
        buf, k, t = self.buf, MAX_CHUNKS, d + c
        decode = AttentionMetadata(self.decode_qsl[: d + 1], buf["seq_lens"][:d], buf["slots"][:d],
                                   buf["block_tables"][:d], 1, self.max_model_len, True,
                                   order=buf["decode_order"][:d] if self.order_decodes else None)
        chunk = AttentionMetadata(buf["chunk_qsl"], buf["seq_lens"][d: d + k], buf["slots"][:t],
                                  buf["block_tables"][d: d + k], t, self.max_model_len, False)
        return AttentionMetadata(buf["chunk_qsl"], buf["seq_lens"][: d + k], buf["slots"][:t],
                                 buf["block_tables"][: d + k], t, self.max_model_len, False, parts=(decode, chunk))

    def _kept(self, d: int) -> KeptRows:
        """The s = d + MAX_CHUNKS sample rows of a key with decode bucket d, sample row i the last row of sequence
        keep_seq[i] (its metadata gathered on the device)."""
        buf, s = self.buf, d + MAX_CHUNKS
        seq = buf["keep_seq"][:s]
        meta = AttentionMetadata(self.decode_qsl[: s + 1], buf["seq_lens"].index_select(0, seq), buf["slots"][:0],
                                 buf["block_tables"].index_select(0, seq), 1, self.max_model_len, True)
        return KeptRows(buf["rows"][:s], meta)

    def _step(self, d: int, c: int) -> torch.Tensor:
        """The padded step of key (d, c) on the staging buffers. The last layer runs only on the sample rows unless
        prune_last_layer() is off, read here: a graph keeps what was in force at its capture."""
        buf = self.buf
        t, s = d + c, d + MAX_CHUNKS
        x = kernels.embed_step(self.model.embed_tokens.weight, buf["input_ids"][:t], buf["src"][:t], self.last_tokens)
        keep = self._kept(d) if prune_last_layer() else None
        hidden = self.model(None, buf["positions"][:t], self._meta(d, c), inputs_embeds=x, keep=keep)
        if keep is None:
            hidden = hidden[buf["rows"][:s]]
        logits = self.model.compute_logits(hidden, out_dtype=torch.float32, out=self.logits[:s])
        return kernels.sample(logits, buf["temperature"][:s], buf["top_k"][:s], buf["top_p"][:s], buf["min_p"][:s],
                              buf["seeds"][:s], buf["steps"][:s], out=self.last_tokens[:s])

    def _fill(self, sched: SchedulerOutput, src_rows: list[int], d_pad: int, c_pad: int) -> None:
        """Write the padded step into the current host set and upload it (one copy)."""
        h = self.staging.host()
        bsz = self.block_size
        reqs = sched.requests
        d = self.num_decodes(sched)
        for i, r in enumerate(reqs[:d]):
            pos = r.num_tokens - 1
            h["input_ids"][i] = r.token_ids[pos]
            h["positions"][i] = pos
            h["slots"][i] = r.block_ids[pos // bsz] * bsz + pos % bsz
            h["src"][i] = src_rows[i]
            h["rows"][i] = h["keep_seq"][i] = i
            h["seq_lens"][i] = pos + 1
            h["block_tables"][i, : len(r.block_ids)] = r.block_ids
        # padding decode sequences (their rows hold chunk or padding tokens): attend to one garbage key
        h["seq_lens"][d:d_pad] = 1
        h["block_tables"][d:d_pad, 0] = 0
        if self.order_decodes:  # the real decode sequences longest first, then the padding ones (one key each)
            h["decode_order"][:d_pad] = longest_first(h["seq_lens"][:d_pad])
        lo = d
        qsl = [lo]
        for j, (r, c) in enumerate(zip(reqs[d:], sched.num_new_tokens[d:])):
            start, end = r.num_computed_tokens, r.num_computed_tokens + c
            pos = np.arange(start, end, dtype=np.int64)
            blocks = np.asarray(r.block_ids, dtype=np.int64)
            hi = lo + c
            h["input_ids"][lo:hi] = r.token_ids[start:end]
            h["positions"][lo:hi] = pos
            h["slots"][lo:hi] = blocks[pos // bsz] * bsz + pos % bsz
            h["src"][lo:hi] = -1
            h["seq_lens"][d_pad + j] = end
            h["block_tables"][d_pad + j, : len(blocks)] = blocks
            h["rows"][d + j], h["keep_seq"][d + j] = hi - 1, d_pad + j
            lo = hi
            qsl.append(hi)
        k = len(qsl) - 1
        for name, value in (("input_ids", 0), ("positions", 0), ("slots", -1), ("src", -1)):
            h[name][lo: d_pad + c_pad] = value  # padding tokens: no sequence, no store
        qsl += [lo] * (MAX_CHUNKS - k)  # absent chunks: no query rows
        h["chunk_qsl"][:] = qsl
        h["seq_lens"][d_pad + k: d_pad + MAX_CHUNKS] = 1
        h["block_tables"][d_pad + k: d_pad + MAX_CHUNKS, 0] = 0
        for i, q in enumerate(reqs):
            p = q.params
            h["temperature"][i], h["top_k"][i], h["top_p"][i], h["min_p"][i] = p.temperature, p.top_k, p.top_p, p.min_p
            h["seeds"][i], h["steps"][i] = q.sample_seed, q.num_sampled
        self._pad_samples(h, d + k, d_pad + MAX_CHUNKS)
        h["keep_seq"][d + k: d_pad + MAX_CHUNKS] = 0
        self.staging.upload_rows("block_tables", d_pad + MAX_CHUNKS)

    def run(self, sched: SchedulerOutput, src_rows: list[int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Replay (or run eagerly) the padded step; see the module contract."""
        n = len(sched.requests)
        key = self.key_for(sched)
        self._fill(sched, src_rows or [-1] * self.num_decodes(sched), *key)
        return self._replay(key, n)

    # ---- capture (StepGraphs.capture) ---------------------------------------------------------
    def pad_inputs(self) -> None:
        """Every decode row, chunk token and sample row padding (both staging sets, uploaded): what capture and the
        warm-up's compile pass run on. The chunk of each key then has no query tokens."""
        for _ in range(2):
            h = self.staging.host()
            for name, value in (("input_ids", 0), ("positions", 0), ("slots", -1), ("src", -1)):
                h[name][:] = value
            h["seq_lens"][:] = 1
            h["block_tables"][:, 0] = 0
            h["chunk_qsl"][:] = 0
            h["decode_order"][:] = np.arange(self.max_decodes)  # a permutation for every key's capture
            self._pad_samples(h, 0, self.max_decodes + MAX_CHUNKS)
            h["keep_seq"][:] = 0
            self.staging.upload()
