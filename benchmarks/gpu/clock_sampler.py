"""NVML sampling on a thread, for the GPU probes: no tachyon import, so a probe that needs only torch runs on a
bare GPU machine."""

from __future__ import annotations

import statistics
import threading


class ClockSampler:
    """SM and memory clocks (MHz), board power (W) and clock-event reasons (NVML's bit mask) sampled every
    `period_s` on a thread (NVML), inside the `with` block."""

    POWER_CAP = 0x4  # the reasons' software power-cap bit

    def __init__(self, period_s: float = 0.05) -> None:
        self.period_s = period_s
        self.samples: list[int] = []
        self.mem_samples: list[int] = []
        self.power_w: list[float] = []
        self.reasons: list[int] = []
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nvml, self.h = pynvml, pynvml.nvmlDeviceGetHandleByIndex(0)
            self._reasons = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
                pynvml.nvmlDeviceGetCurrentClocksThrottleReasons  # the older name
        except Exception:  # noqa: BLE001 - no NVML (CPU smoke runs): no samples
            self.nvml = self.h = None
        self._stop = threading.Event()

    def _loop(self) -> None:
        while self.h is not None and not self._stop.wait(self.period_s):
            self.samples.append(self.nvml.nvmlDeviceGetClockInfo(self.h, self.nvml.NVML_CLOCK_SM))
            self.mem_samples.append(self.nvml.nvmlDeviceGetClockInfo(self.h, self.nvml.NVML_CLOCK_MEM))
            self.power_w.append(self.nvml.nvmlDeviceGetPowerUsage(self.h) / 1e3)
            self.reasons.append(self._reasons(self.h))

    def capped_share(self) -> float | None:
        """Share of the samples throttled by the power cap (None without samples)."""
        return sum(1 for r in self.reasons if r & self.POWER_CAP) / len(self.reasons) if self.reasons else None

    def summary(self) -> dict:
        """Median board power (W) and SM clock (MHz), and the power-capped share; None each without samples."""
        return {"power_w_median": statistics.median(self.power_w) if self.power_w else None,
                "sm_mhz_median": statistics.median(self.samples) if self.samples else None,
                "power_capped_share": self.capped_share()}

    def __enter__(self) -> ClockSampler:
        self._t = threading.Thread(target=self._loop, daemon=True)
        self._t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join()


def energy_reader():
    """A function returning NVML's energy counter in joules, or None where NVML is missing."""
    try:
        import pynvml

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        return lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(h) / 1e3
    except Exception:  # noqa: BLE001 - no NVML: no energy
        return None
