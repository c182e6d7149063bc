"""Weight prefetch into L2 on a side stream while a small decode step's attention leaves HBM idle.

Contract: the decode-graph runner sets `budget_bytes` (> 0: on) around a small batch's forward; there
`after_qkv(weights)` forks a side stream after the layer's qkv projection and prefetches the given
weights in order (the layer's o_proj, gate_up, down) up to the budget, and `join()`, called once at the
end of the forward, makes the main stream wait for the side stream (a graph capture must rejoin every
fork). Prefetches are cache hints (kernels.l2_prefetch): results never depend on them.
"""

from __future__ import annotations

import torch

from tachyon import kernels


class WeightPrefetcher:
    def __init__(self) -> None:
        self.budget_bytes = 0
        self._stream: torch.cuda.Stream | None = None
        self._forked = False

    def after_qkv(self, weights: list[torch.Tensor]) -> None:
        if self.budget_bytes <= 0 or not weights[0].is_cuda:
            return
        main = torch.cuda.current_stream(weights[0].device)
        if self._stream is None:
            self._stream = torch.cuda.Stream(device=weights[0].device)
        self._stream.wait_stream(main)  # after the qkv GEMV: HBM is free until the o_proj GEMV
        left = self.budget_bytes
        with torch.cuda.stream(self._stream):
            for w in weights:
                n = min(left, w.numel() * w.element_size())
                kernels.l2_prefetch(w, n)
                left -= n
                if left <= 0:
                    break
        self._forked = True

    def join(self) -> None:
        if self._forked:
            torch.cuda.current_stream(self._stream.device).wait_stream(self._stream)
            self._forked = False
