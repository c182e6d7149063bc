"""GPU measurements around a timed region: peak allocated memory (torch) and energy (NVML, optional).

Contract: `with GpuMeter() as m: ...` then `m.peak_mem_gb` and `m.energy_j` (None without a GPU, or
without pynvml / energy counters). `sync()` waits for queued GPU work (no-op on CPU).
"""

from __future__ import annotations

import os


def cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


def sync() -> None:
    if cuda_available():
        import torch

        torch.cuda.synchronize()


def nvml_handle():
    """(pynvml, handle) of the first visible GPU (CUDA_VISIBLE_DEVICES' first entry, NVML numbering), or (None, None)
    without NVML."""
    try:
        import pynvml

        pynvml.nvmlInit()
        vis = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip()
        idx = int(vis) if vis.isdigit() else 0
        return pynvml, pynvml.nvmlDeviceGetHandleByIndex(idx)
    except Exception:
        return None, None


class GpuMeter:
    def __init__(self) -> None:
        self.peak_mem_gb: float | None = None
        self.energy_j: float | None = None
        self._gpu = cuda_available()
        self._nvml, self._handle = nvml_handle() if self._gpu else (None, None)
        self._e0: int | None = None

    def _energy_mj(self) -> int | None:
        if self._handle is None:
            return None
        try:
            return int(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle))
        except Exception:
            return None

    def __enter__(self) -> GpuMeter:
        if self._gpu:
            import torch

            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        self._e0 = self._energy_mj()
        return self

    def __exit__(self, *exc) -> None:
        if not self._gpu:
            return
        import torch

        torch.cuda.synchronize()
        self.peak_mem_gb = torch.cuda.max_memory_allocated() / 1e9
        e1 = self._energy_mj()
        if self._e0 is not None and e1 is not None:
            self.energy_j = (e1 - self._e0) / 1e3
