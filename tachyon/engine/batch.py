"""The flat variable-length batch of one step (layout in docs/architecture.md)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import torch

from tachyon.engine.scheduler import SchedulerOutput


def prune_last_layer() -> bool:
    """Steps run the last layer's attention output path and MLP only on the rows that sample (a prefill
    chunk's other rows feed nothing after it; models' `keep`). TACHYON_PRUNE_LAST_LAYER=0: every row (an A/B
    knob, read per eager step and at a graph's capture)."""
    return os.environ.get("TACHYON_PRUNE_LAST_LAYER", "1") != "0"


@dataclass
class AttentionMetadata:
    query_start_loc: torch.Tensor  # int32 [B+1]
    seq_lens: torch.Tensor  # int32 [B]
    slot_mapping: torch.Tensor  # int64 [T]
    block_tables: torch.Tensor  # int32 [B, max_blocks]
    max_query_len: int
    max_seq_len: int
    is_decode_only: bool
    # a mixed step's (decode part, chunk part) (engine/mixed_graph.py; kernels/attention_mixed.py's contract): each
    # part's query_start_loc indexes this batch's rows, and the attention writes each part's rows of one output; the
    # slot mapping above still stores every row's K/V
    parts: tuple[AttentionMetadata, ...] | None = None
    # a mixed step's decode part, or a decode graph's step, may carry its sequences heaviest first (int32 [B], a
    # permutation): the order the one-launch mixed attention's, or the decode kernel's, programs take them in; no
    # result depends on it
    order: torch.Tensor | None = None


def longest_first(seq_lens: np.ndarray) -> np.ndarray:
    """The sequences' indices, longest context first (stable: ties keep batch order), as a graph runner stages
    AttentionMetadata.order; a padding sequence (one key) sorts after every real one."""
    return np.argsort(-seq_lens, kind="stable")


@dataclass
class KeptRows:
    """The rows whose final hidden state a step needs (its logits rows), for a model that then runs its last
    layer's attention output path and MLP on those rows only. `meta` describes them as one query per
    sequence, each at its sequence's last position of the step (max_query_len 1; no slots: the full batch's
    pass stores the K/V)."""
    rows: torch.Tensor  # int64 [n], flat token indices (build_batch's ascending; a mixed graph's padding rows repeat 0)
    meta: AttentionMetadata


@dataclass
class FlatBatch:
    input_ids: torch.Tensor  # int64 [T]
    positions: torch.Tensor  # int64 [T]
    meta: AttentionMetadata
    sample_indices: list[int]  # index into scheduled requests of those sampling a token this step
    logits_rows: list[int]  # flat token index of the last token of each sampling request
    keep: KeptRows | None = None  # set when only the logits rows' final hidden states are wanted

    def logits_hidden(self, hidden: torch.Tensor) -> torch.Tensor:
        """The logits rows' final hidden states out of the model's output for this batch (all rows, or only
        those when `keep` was given to the model)."""
        return hidden if self.keep is not None else hidden[self.logits_rows]


def build_batch(sched: SchedulerOutput, block_size: int, device: torch.device, keep_logits_rows: bool = False
                ) -> FlatBatch:
    """Flatten the scheduled chunks. A request samples iff its chunk reaches its last known token.
    `keep_logits_rows`: the caller needs the final hidden states of the logits rows only (no prompt logprobs);
    when those are fewer than the step's tokens, `keep` describes them (a prefill chunk's other rows then
    skip the last layer's attention output and MLP)."""
    ids: list[int] = []
    pos: list[int] = []
    slots: list[int] = []
    qsl = [0]
    seq_lens: list[int] = []
    tables: list[list[int]] = []
    sample_indices: list[int] = []
    logits_rows: list[int] = []
    for i, (req, n) in enumerate(zip(sched.requests, sched.num_new_tokens)):
        start = req.num_computed_tokens
        end = start + n
        ids.extend(req.token_ids[start:end])
        pos.extend(range(start, end))
        blocks = req.block_ids
        slots.extend(blocks[p // block_size] * block_size + p % block_size for p in range(start, end))
        qsl.append(qsl[-1] + n)
        seq_lens.append(end)
        tables.append(blocks)
        if end == req.num_tokens:
            sample_indices.append(i)
            logits_rows.append(qsl[-1] - 1)
    max_blocks = max(len(t) for t in tables)
    table = torch.zeros(len(tables), max_blocks, dtype=torch.int32)
    for i, t in enumerate(tables):
        table[i, : len(t)] = torch.tensor(t, dtype=torch.int32)
    q_lens = sched.num_new_tokens
    meta = AttentionMetadata(
        query_start_loc=torch.tensor(qsl, dtype=torch.int32, device=device),
        seq_lens=torch.tensor(seq_lens, dtype=torch.int32, device=device),
        slot_mapping=torch.tensor(slots, dtype=torch.int64, device=device),
        block_tables=table.to(device),
        max_query_len=max(q_lens),
        max_seq_len=max(seq_lens),
        is_decode_only=all(q == 1 for q in q_lens),
    )
    keep = None
    if keep_logits_rows and len(logits_rows) < len(ids):
        seqs = sample_indices  # the sampling requests' sequence indices, in logits_rows' order
        kept_lens = [seq_lens[i] for i in seqs]
        keep = KeptRows(
            rows=torch.tensor(logits_rows, dtype=torch.int64, device=device),
            meta=AttentionMetadata(
                query_start_loc=torch.arange(len(seqs) + 1, dtype=torch.int32, device=device),
                seq_lens=torch.tensor(kept_lens, dtype=torch.int32, device=device),
                slot_mapping=torch.empty(0, dtype=torch.int64, device=device),
                block_tables=table[seqs].to(device),
                max_query_len=1,
                max_seq_len=max(kept_lens, default=1),
                is_decode_only=True,
            ),
        )
    return FlatBatch(
        input_ids=torch.tensor(ids, dtype=torch.int64, device=device),
        positions=torch.tensor(pos, dtype=torch.int64, device=device),
        meta=meta,
        sample_indices=sample_indices,
        logits_rows=logits_rows,
        keep=keep,
    )
