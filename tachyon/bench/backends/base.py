"""The offline backend contract.

A backend loads one model (`load`), runs a whole `Workload` as one timed batch job (`run`) and
frees its memory (`close`). `run` must send exactly the workload's token ids (asserting the input
lengths it saw), force exactly `max_tokens` new tokens per request (ignore EOS), use the workload's
sampling, and return per-request `RequestRecord`s on a clock where 0 is the start of the run
(`chunk_times` = [first token, last token] with `chunk_tokens` = [1, N-1] where the backend can time
them) and the output token count it actually produced.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tachyon.bench.schema import RequestRecord
from tachyon.bench.shapes import builtin_name, shape_dir
from tachyon.bench.workloads import Workload


@dataclass
class BackendOptions:
    model: str | None
    dummy: bool = False
    dtype: str = "auto"
    device: str = "auto"
    seed: int = 0
    hf_batch_size: int = 64
    engine_args: dict[str, Any] = field(default_factory=dict)

    def model_path(self) -> str | None:
        """An HF directory for built-in shape names (config only: dummy weights), else `model`."""
        if self.model and builtin_name(self.model):
            if not self.dummy:
                raise ValueError(f"{self.model!r} is a built-in shape: add --dummy (random weights)")
            return shape_dir(self.model)
        return self.model


@dataclass
class BackendRun:
    records: list[RequestRecord]
    duration_s: float
    info: dict[str, Any] = field(default_factory=dict)


class Backend:
    name = "base"

    def __init__(self, opts: BackendOptions) -> None:
        self.opts = opts

    @property
    def warmup_requests(self) -> int:
        """How many of a workload's first requests the untimed warm-up runs (at full length): enough to meet the
        shapes the timed run will (a static-batch backend: one whole batch)."""
        return 4

    def load(self) -> None:
        raise NotImplementedError

    def run(self, workload: Workload) -> BackendRun:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def info(self) -> dict[str, Any]:
        return {}


def check_prompt(i: int, expected: list[int], seen: list[int] | None) -> None:
    """Assert the backend saw exactly the workload's prompt (length and ids)."""
    if seen is None:
        return
    if len(seen) != len(expected) or list(seen) != list(expected):
        raise AssertionError(f"request {i}: backend saw {len(seen)} prompt tokens, workload has "
                             f"{len(expected)} (prompt was re-tokenised or truncated)")


def record(i: int, prompt_len: int, max_tokens: int, n_out: int, first: float | None,
           last: float | None, end: float) -> RequestRecord:
    times, toks = [], []
    if first is not None and n_out >= 1:
        times, toks = [first], [1]
        if n_out > 1 and last is not None:
            times.append(max(last, first))
            toks.append(n_out - 1)
    return RequestRecord(id=str(i), prompt_tokens=prompt_len, max_tokens=max_tokens, output_tokens=n_out,
                         scheduled=None, sent=0.0, chunk_times=times, chunk_tokens=toks, end=end)
