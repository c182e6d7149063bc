"""Live progress for long runs (rich): requests done / total, in flight, achieved vs target rate,
errors, ETA. `Progress(enabled=False)` is a silent no-op with the same methods."""

from __future__ import annotations

import time


class LoadProgress:
    def __init__(self, total: int, label: str = "", target_rate: float | None = None,
                 enabled: bool = True) -> None:
        self.total, self.label, self.target_rate = total, label, target_rate
        self.done = self.inflight = self.errors = 0
        self._t0 = time.perf_counter()
        self._prog = None
        if enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self._prog = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                  TextColumn("{task.fields[info]}"), TimeRemainingColumn(), transient=True)
            self._task = self._prog.add_task(label or "requests", total=total, info="")

    def __enter__(self) -> LoadProgress:
        if self._prog is not None:
            self._prog.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._prog is not None:
            self._prog.stop()

    def sent(self) -> None:
        self.inflight += 1
        self._refresh()

    def finished(self, error: bool) -> None:
        self.inflight -= 1
        self.done += 1
        self.errors += int(error)
        self._refresh()

    def _refresh(self) -> None:
        if self._prog is None:
            return
        el = max(time.perf_counter() - self._t0, 1e-9)
        target = f" / {self.target_rate:.2f}" if self.target_rate else ""
        info = (f"in flight {self.inflight}  rate {self.done / el:.2f}{target} req/s  "
                f"errors {self.errors}")
        self._prog.update(self._task, completed=self.done, info=info)
