"""Versioned result schema: one JSON summary per benchmark, per-request records in a JSONL beside it.

Contract: `save_result(result, path)` writes `path` (everything but request records) and
`path.with_suffix(".requests.jsonl")` (one `RequestRecord` per line, tagged with its run label);
`load_result(path)` reads both back into a `BenchResult`. Bump `SCHEMA_VERSION` on breaking changes;
loading a newer major version raises `ValueError`.
"""

from __future__ import annotations

import gzip
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

SCHEMA_VERSION = 1


class Stats(BaseModel):
    """Distribution summary of one metric (seconds unless the name says otherwise)."""

    n: int = 0
    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    min: float | None = None
    max: float | None = None


class SLO(BaseModel):
    """Latency objective: each bound applies per request (goodput) and to the run's percentile."""

    name: str = "custom"
    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None
    percentile: float = 99.0
    max_error_rate: float = 0.0


class Summary(BaseModel):
    num_requests: int = 0
    num_ok: int = 0
    num_failed: int = 0
    error_rate: float = 0.0
    duration_s: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    request_throughput: float = 0.0
    output_throughput: float = 0.0
    total_throughput: float = 0.0
    ttft: Stats = Field(default_factory=Stats)
    tpot: Stats = Field(default_factory=Stats)
    itl: Stats = Field(default_factory=Stats)
    itl_pooled: Stats = Field(default_factory=Stats)
    chunk_gap: Stats = Field(default_factory=Stats)
    e2e: Stats = Field(default_factory=Stats)
    queue_wait: Stats = Field(default_factory=Stats)
    dispatch_lag: Stats = Field(default_factory=Stats)
    slo: SLO | None = None
    goodput: float | None = None
    good_fraction: float | None = None
    slo_pass: bool | None = None
    extra: dict[str, Any] = Field(default_factory=dict)


class RequestRecord(BaseModel):
    """One request as the client saw it; times in seconds on the benchmark clock (0 = start)."""

    id: str
    prompt_tokens: int
    max_tokens: int | None = None
    output_tokens: int | None = None
    scheduled: float | None = None
    sent: float
    queue_wait: float = 0.0
    first_byte: float | None = None
    chunk_times: list[float] = Field(default_factory=list)
    chunk_tokens: list[int] = Field(default_factory=list)
    chunk_tokens_inferred: bool = False  # server gave no per-chunk counts: N spread over the chunks
    end: float | None = None
    error: str | None = None


class Environment(BaseModel):
    python: str = ""
    platform: str = ""
    cpu: str = ""
    gpu: str | None = None
    gpu_count: int = 0
    gpu_memory_gb: float | None = None
    driver: str | None = None
    cuda: str | None = None
    torch: str | None = None
    triton: str | None = None
    transformers: str | None = None
    vllm: str | None = None
    tachyon: str | None = None
    git_sha: str | None = None
    git_dirty: bool | None = None
    # bench/env.source_digest of the tachyon package that ran: which code it was, where a copied tree's sha is stale
    source_digest: str | None = None
    # NVML's identity and limits of the measured GPU (uuid, serial, power_limit_w, sm_clock_max_mhz, mem_clock_max_mhz):
    # whether two results came from the same board, and under which cap (H200 machines differ by ~1-4%)
    gpu_board: dict[str, Any] | None = None
    # the TACHYON_* environment knobs in force (A/B switches such as TACHYON_DECODE_ORDER), TACHYON_GIT_SHA aside
    knobs: dict[str, str] = Field(default_factory=dict)


class Run(BaseModel):
    """One measured configuration: a backend (offline) or a load point (serve)."""

    label: str
    config: dict[str, Any] = Field(default_factory=dict)
    summary: Summary = Field(default_factory=Summary)
    requests: list[RequestRecord] = Field(default_factory=list, exclude=True)


class BenchResult(BaseModel):
    schema_version: int = SCHEMA_VERSION
    kind: Literal["offline", "serve", "sweep"]
    created: str = Field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))
    env: Environment = Field(default_factory=Environment)
    model: str | None = None
    quantization: str | None = None
    dtype: str | None = None
    engine_args: dict[str, Any] = Field(default_factory=dict)
    workload: str | None = None
    seed: int | None = None
    runs: list[Run] = Field(default_factory=list)
    analysis: dict[str, Any] = Field(default_factory=dict)  # knee, max sustainable rate, capacity ...
    warnings: list[str] = Field(default_factory=list)
    requests_file: str | None = None


def requests_path(path: str | Path) -> Path:
    p = Path(path)
    return p.with_name(p.stem + ".requests.jsonl")


def save_result(result: BenchResult, path: str | Path) -> Path:
    """Write the summary JSON and the per-request JSONL; returns the JSON path."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    rp = requests_path(p)
    result.requests_file = rp.name
    with rp.open("w") as f:
        for run in result.runs:
            for r in run.requests:
                f.write(json.dumps({"run": run.label, **r.model_dump()}) + "\n")
    p.write_text(result.model_dump_json(indent=2) + "\n")
    return p


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file, gzipped when its name ends in .gz; lines that are not JSON objects (a
    server log's stray warnings) are skipped."""
    p = Path(path)
    with (gzip.open(p, "rt") if p.suffix == ".gz" else p.open()) as f:
        return [json.loads(line) for line in f if line.startswith("{")]


def load_result(path: str | Path) -> BenchResult:
    p = Path(path)
    data = json.loads(p.read_text())
    ver = int(data.get("schema_version", 0))
    if ver > SCHEMA_VERSION:
        raise ValueError(f"{p}: schema_version {ver} is newer than this tachyon ({SCHEMA_VERSION})")
    res = BenchResult.model_validate(data)
    rp = p.with_name(res.requests_file) if res.requests_file else requests_path(p)
    if rp.exists():
        by_label = {run.label: run for run in res.runs}
        for d in read_jsonl(rp):
            run = by_label.get(d.pop("run", None))
            if run is not None:
                run.requests.append(RequestRecord.model_validate(d))
    return res
