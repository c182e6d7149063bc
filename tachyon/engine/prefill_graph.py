"""Small prefill and mixed steps (model forward + logits + sampling) as CUDA graphs, one per
(token bucket, sequence bucket).

Why: an eager step launches ~15 kernels per layer from Python; on a slow host a short prompt's step
is bound by those launches, not by the GPU (TTFT). A replay costs one launch.

Contract: `fits(sched)` says whether a step can replay a graph: it is not decode-only, schedules at
most `max_tokens` tokens over at most `max_seqs` requests, and no request wants prompt logprobs.
`run(sched)` pads the flat batch to its buckets (padding tokens store to slot -1 and belong to no
sequence; padding sequences have no query tokens and seq_len 0, and draw greedily from row 0),
replays, and returns the logits and drawn token of each request's last scheduled token ([n, V]
fp32, [n] int64 on the device, valid until the next run), whether or not that request samples this
step. The drawn tokens are written into the first rows of `last_tokens` (int64, at least `max_seqs` long;
the runner's overlap feed; padding rows included) and returned as a view of it: a decode step launched
next can read them there without a host round trip. The graphs read only the staging
buffers owned here and the KV cache bound to the model: capture after the cache is allocated, never
free it. Without graphs (`use_graphs=False`, or a
non-CUDA device) `run` executes the same padded step eagerly, which is what CPU tests check.
"""

from __future__ import annotations

import numpy as np
import torch

from tachyon import kernels
from tachyon.engine.batch import AttentionMetadata
from tachyon.engine.scheduler import SchedulerOutput
from tachyon.engine.staging import StagingBuffers
from tachyon.engine.step_graphs import StepGraphs

TOKEN_BUCKETS = (16, 32, 64, 128, 256, 512, 1024, 2048)
SEQ_BUCKETS = (1, 2, 4, 8)


class PrefillGraphRunner(StepGraphs):
    def __init__(self, model: torch.nn.Module, *, max_tokens: int, max_seqs: int, max_model_len: int,
                 block_size: int, vocab_size: int, device: torch.device, last_tokens: torch.Tensor,
                 use_graphs: bool = True):
        if max_tokens < 2 or max_seqs < 1:
            raise ValueError(f"prefill graphs need max_tokens >= 2 and max_seqs >= 1, got {max_tokens}, {max_seqs}")
        super().__init__(model, max_model_len=max_model_len, block_size=block_size, device=device,
                         last_tokens=last_tokens, sample_rows=max_seqs, use_graphs=use_graphs)
        self.token_buckets = [t for t in TOKEN_BUCKETS if t < max_tokens] + [max_tokens]
        self.seq_buckets = [b for b in SEQ_BUCKETS if b < max_seqs] + [max_seqs]
        self.max_tokens, self.max_seqs = max_tokens, max_seqs
        self.max_blocks = -(-max_model_len // block_size)
        T, B, MB = max_tokens, max_seqs, self.max_blocks
        i64, i32, f32 = torch.int64, torch.int32, torch.float32
        self.staging = StagingBuffers(
            [(n, i64, (T,)) for n in ("input_ids", "positions", "slots")]
            + [(n, i64, (B,)) for n in ("rows", "seeds", "steps")]
            + [("query_start_loc", i32, (B + 1,))]
            + [(n, i32, (B,)) for n in ("seq_lens", "top_k")]
            + [(n, f32, (B,)) for n in ("temperature", "top_p", "min_p")]
            + [("block_tables", i32, (B, MB))], device)
        self.buf = self.staging.device
        # one logits buffer for every graph (the fp32 conversion writes it: no extra kernel)
        self.logits = torch.zeros(B, vocab_size, dtype=torch.float32, device=device)

    @property
    def keys(self) -> list[tuple[int, int]]:
        return [(t, b) for t in self.token_buckets for b in self.seq_buckets if b <= t]

    # ---- eligibility and buckets --------------------------------------------------------------
    def fits(self, sched: SchedulerOutput) -> bool:
        n = sched.num_new_tokens
        if len(n) > self.max_seqs or sum(n) > self.max_tokens or max(n) <= 1:
            return False
        return not any(r.wants_prompt_logprobs() for r in sched.requests)

    def _bucket(self, buckets: list[int], n: int) -> int:
        return next(b for b in buckets if b >= n)

    # ---- the step -----------------------------------------------------------------------------
    def _step(self, t: int, b: int) -> torch.Tensor:
        buf = self.buf
        meta = AttentionMetadata(buf["query_start_loc"][: b + 1], buf["seq_lens"][:b], buf["slots"][:t],
                                 buf["block_tables"][:b], t, self.max_model_len, False)
        hidden = self.model(buf["input_ids"][:t], buf["positions"][:t], meta)
        logits = self.logits[:b]
        logits.copy_(self.model.compute_logits(hidden[buf["rows"][:b]]))
        return kernels.sample(logits, buf["temperature"][:b], buf["top_k"][:b], buf["top_p"][:b], buf["min_p"][:b],
                              buf["seeds"][:b], buf["steps"][:b], out=self.last_tokens[:b])

    def _fill(self, sched: SchedulerOutput, t: int, b: int) -> None:
        """Write the padded batch into the current host set and upload it (one copy)."""
        h = self.staging.host()
        bsz = self.block_size
        off = 0
        for i, (r, n) in enumerate(zip(sched.requests, sched.num_new_tokens)):
            start, end = r.num_computed_tokens, r.num_computed_tokens + n
            pos = np.arange(start, end, dtype=np.int64)
            blocks = np.asarray(r.block_ids, dtype=np.int64)
            h["input_ids"][off: off + n] = r.token_ids[start:end]
            h["positions"][off: off + n] = pos
            h["slots"][off: off + n] = blocks[pos // bsz] * bsz + pos % bsz
            h["query_start_loc"][i] = off
            off += n
            h["rows"][i] = off - 1
            h["seq_lens"][i] = end
            h["block_tables"][i, : len(blocks)] = blocks
            p = r.params
            h["temperature"][i], h["top_k"][i], h["top_p"][i], h["min_p"][i] = p.temperature, p.top_k, p.top_p, p.min_p
            h["seeds"][i], h["steps"][i] = r.sample_seed, r.num_sampled
        self._pad(h, off, t, len(sched.requests), b)
        self.staging.upload_rows("block_tables", b)

    @classmethod
    def _pad(cls, h: dict[str, np.ndarray], tokens: int, t: int, seqs: int, b: int) -> None:
        """Tokens [tokens, t) and sequences [seqs, b) of host set `h` become padding."""
        h["input_ids"][tokens:t] = 0
        h["positions"][tokens:t] = 0
        h["slots"][tokens:t] = -1  # padding tokens store nothing
        h["query_start_loc"][seqs: b + 1] = tokens  # padding sequences: no query tokens ...
        h["seq_lens"][seqs:b] = 0  # ... and no keys
        cls._pad_samples(h, seqs, b)

    def run(self, sched: SchedulerOutput) -> tuple[torch.Tensor, torch.Tensor]:
        """Replay (or run eagerly) the padded step; see the module contract."""
        n = len(sched.requests)
        key = (self._bucket(self.token_buckets, sum(sched.num_new_tokens)), self._bucket(self.seq_buckets, n))
        self._fill(sched, *key)
        return self._replay(key, n)

    # ---- capture (StepGraphs.capture) ---------------------------------------------------------
    def pad_inputs(self) -> None:
        """Every token and sequence padding, in both staging sets (uploaded): what capture and the warm-up's
        compile pass run on."""
        for _ in range(2):
            self._pad(self.staging.host(), 0, self.max_tokens, 0, self.max_seqs)
            self.staging.upload()
