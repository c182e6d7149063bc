"""The replay-or-run and capture logic that the prefill and mixed step graphs share.

Contract: a subclass owns its staging buffers, a shared fp32 `logits` buffer [rows, V] that its step body fills,
and defines `keys` (every bucket tuple to capture), `_step(*key)` (the padded step on the staging buffers,
returning the drawn tokens, a view of the runner's `last_tokens`) and `pad_inputs()` (every row padding, both
staging sets uploaded). `_replay(key, n)` runs the step of `key` (its graph, or eagerly without graphs) after the
subclass filled the inputs, and returns the first n rows of logits and tokens.
"""

from __future__ import annotations

import numpy as np
import torch

from tachyon.engine.cuda_graph import capture_step

# sampling fields a padding row takes: greedy (temperature 0) from row 0, no filter
_SAMPLE_PADDING = {"rows": 0, "seeds": 0, "steps": 0, "top_k": 0, "temperature": 0, "min_p": 0, "top_p": 1.0}


class StepGraphs:
    def __init__(self, model: torch.nn.Module, *, max_model_len: int, block_size: int, device: torch.device,
                 last_tokens: torch.Tensor, sample_rows: int, use_graphs: bool) -> None:
        """`last_tokens` (the runner's overlap feed, not owned here) must be int64 and hold a row for each of a
        step's `sample_rows` (its most sample rows). Graphs only on a CUDA device."""
        if last_tokens.dtype != torch.int64 or last_tokens.numel() < sample_rows:
            raise ValueError(f"last_tokens must be int64 with at least {sample_rows} rows (a step's sample rows), "
                             f"got {last_tokens.numel()} of {last_tokens.dtype}")
        self.model = model
        self.max_model_len = max_model_len
        self.block_size = block_size
        self.device = device
        self.last_tokens = last_tokens
        self.use_graphs = use_graphs and device.type == "cuda"
        self.graphs: dict[tuple[int, ...], torch.cuda.CUDAGraph] = {}
        self.tokens: dict[tuple[int, ...], torch.Tensor] = {}
        self.pool = None
        self.logits: torch.Tensor

    @property
    def keys(self) -> list[tuple[int, ...]]:
        raise NotImplementedError

    def _step(self, *key: int) -> torch.Tensor:
        raise NotImplementedError

    def pad_inputs(self) -> None:
        raise NotImplementedError

    @staticmethod
    def _pad_samples(h: dict[str, np.ndarray], start: int, end: int) -> None:
        """Sample rows [start, end) of host set `h` become padding rows."""
        for name, value in _SAMPLE_PADDING.items():
            h[name][start:end] = value

    def _replay(self, key: tuple[int, ...], n: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.use_graphs:
            self.graphs[key].replay()
            tokens = self.tokens[key]
        else:
            tokens = self._step(*key)
        return self.logits[:n], tokens[:n]

    @torch.inference_mode()
    def capture(self, pool=None, keys: list[tuple[int, ...]] | None = None, eager_first: bool = False) -> None:
        """Capture the given (default: every) key, the largest steps first, into `pool` (e.g. the decode graphs'
        pool: the steps never run concurrently) or a new one (capture_step; `eager_first`: each after an eager
        run)."""
        if not self.use_graphs:
            return
        self.pool = pool
        self.pad_inputs()
        for key in sorted(keys or self.keys, key=lambda k: (sum(k), k), reverse=True):
            self.graphs[key], self.tokens[key], self.pool = capture_step(lambda k=key: self._step(*k), self.pool,
                                                                         eager_first)
        torch.cuda.synchronize()

    def release(self) -> None:
        self.graphs.clear()
        self.tokens.clear()
