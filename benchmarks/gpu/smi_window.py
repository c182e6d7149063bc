"""The clock and power a board held over a benchmark's last busy stretch, from the nvidia-smi CSV that
`bench_scripts/acceptance.sh` logs beside a nano256 run (`--query-gpu=timestamp,clocks.sm,power.draw,
power.draw.instant,clocks_event_reasons.active`, one sample every 100 ms).

The busy stretch is the last run of samples above `--min-watts`, allowing gaps of up to `--max-gap` samples; in
an acceptance CSV that is Tachyon's timed run (transformers runs first). With `--bench` (the run's `bench offline`
JSON) it also prints Tachyon's output tok/s per MHz held. Usage:

    python benchmarks/gpu/smi_window.py benchmarks/results/session39/acceptance_6b0536c_call1/smi_nano_7b.csv \
        --bench benchmarks/results/session39/acceptance_6b0536c_call1/offline/nano256_qwen2.5-7b.json
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
from dataclasses import dataclass
from pathlib import Path

from clock_sampler import ClockSampler  # same folder (the script folder is on sys.path)


@dataclass(frozen=True)
class Sample:
    timestamp: str
    sm_mhz: int
    power_w: float
    reasons: int


def read_samples(path: Path) -> list[Sample]:
    """The CSV's samples; rows nvidia-smi could not fill (no 'MHz' in the clock field) are skipped."""
    out = []
    with open(path, newline="") as f:
        rows = csv.reader(f)
        next(rows, None)  # header
        for row in rows:
            if len(row) < 5 or "MHz" not in row[1]:
                continue
            out.append(Sample(row[0].strip(), int(row[1].split()[0]), float(row[2].split()[0]),
                              int(row[4].strip(), 16)))
    return out


def last_busy_window(samples: list[Sample], min_watts: float = 400.0, max_gap: int = 10) -> list[Sample]:
    """The last stretch of samples drawing more than `min_watts`, joined across gaps of at most `max_gap`
    samples (the gaps' samples included); empty when no sample is above it."""
    busy = [i for i, s in enumerate(samples) if s.power_w > min_watts]
    if not busy:
        return []
    start = end = busy[-1]
    for i in reversed(busy[:-1]):
        if start - i > max_gap:
            break
        start = i
    return samples[start:end + 1]


def summarize(window: list[Sample]) -> dict:
    """Sample count, median SM clock, median and mean power, and how many samples carry the power-cap bit."""
    if not window:
        return {"samples": 0}
    return {"first": window[0].timestamp, "last": window[-1].timestamp, "samples": len(window),
            "sm_mhz_median": statistics.median(s.sm_mhz for s in window),
            "power_w_median": round(statistics.median(s.power_w for s in window), 1),
            "power_w_mean": round(statistics.mean(s.power_w for s in window), 1),
            "power_capped": sum(1 for s in window if s.reasons & ClockSampler.POWER_CAP)}


def tachyon_tok_s(bench_json: Path) -> float:
    """Tachyon's output tok/s in a `bench offline` result file."""
    runs = json.loads(bench_json.read_text())["runs"]
    return next(r["summary"]["output_throughput"] for r in runs if r["label"] == "tachyon")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", type=Path)
    ap.add_argument("--bench", type=Path, help="the run's `bench offline` JSON: adds tok/s per MHz")
    ap.add_argument("--min-watts", type=float, default=400.0)
    ap.add_argument("--max-gap", type=int, default=10, help="samples (100 ms each in acceptance.sh)")
    args = ap.parse_args(argv)
    out = summarize(last_busy_window(read_samples(args.csv), args.min_watts, args.max_gap))
    if args.bench and out["samples"]:
        out["tok_s"] = round(tachyon_tok_s(args.bench), 1)
        out["tok_s_per_mhz"] = round(out["tok_s"] / out["sm_mhz_median"], 2)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
