"""Prometheus metrics under vLLM's names with the `tachyon:` prefix, labelled by `model_name`.

Engine-side state (running / waiting requests, KV usage, preemptions) is read from
`engine.stats()` at scrape time; request-side histograms and counters are recorded by the server
as each request ends. Labels never carry keys, prompts or request ids.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

P = "tachyon:"
_LAT = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
)
_TOK = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000)


def stat(stats: Any, *names: str, default: float = 0.0) -> float:
    """First present attribute (or dict key) of `stats` among `names`."""
    for n in names:
        v = stats.get(n) if isinstance(stats, dict) else getattr(stats, n, None)
        if v is not None:
            return float(v)
    return default


# (metric suffix, kind, help, EngineStats attribute names in order of preference)
_ENGINE_METRICS = (
    ("num_requests_running", "gauge", "Requests running on the engine.", ("num_running", "running")),
    ("num_requests_waiting", "gauge", "Requests waiting in the engine queue.", ("num_waiting", "waiting")),
    ("kv_cache_usage_perc", "gauge", "KV-cache usage; 1 means 100 percent.", ("kv_usage", "kv_cache_usage")),
    ("num_preemptions", "counter", "Cumulative preemptions by the engine.", ("num_preemptions",)),
    ("kv_cache_free_blocks", "gauge", "KV blocks free or cached (reusable).", ("num_free_blocks",)),
    ("kv_cache_total_blocks", "gauge", "KV blocks in the pool.", ("num_total_blocks",)),
    ("prefix_cache_queries", "counter", "Tokens of requests admitted with prefix caching on.",
     ("prefix_cache_queries",)),
    ("prefix_cache_hits", "counter", "Of those, tokens found in the prefix cache instead of computed.",
     ("prefix_cache_hits",)),
    ("prefix_cache_waits", "counter", "Admissions held back a step to share a prefix another request was computing.",
     ("prefix_cache_waits",)),
    ("late_kernel_compiles", "counter", "Triton kernel compiles after start-up (each stalls the step that needs it).",
     ("late_kernel_compiles",)),
)


class _EngineCollector:
    """Reads each engine's stats() when Prometheus scrapes."""

    def __init__(self, engines: list[tuple[str, Any]]) -> None:
        self._engines = engines

    def collect(self) -> Iterable[Metric]:
        families = []
        for suffix, kind, doc, _ in _ENGINE_METRICS:
            cls = GaugeMetricFamily if kind == "gauge" else CounterMetricFamily
            families.append(cls(P + suffix, doc, labels=["model_name"]))
        for name, engine in self._engines:
            try:
                s = engine.stats()
            except Exception:  # noqa: BLE001 - a dead engine must not break the scrape
                continue
            for fam, (_, _, _, attrs) in zip(families, _ENGINE_METRICS, strict=True):
                fam.add_metric([name], stat(s, *attrs))
        return families


class ServerMetrics:
    """All metrics of one server (own registry, so several apps can live in one process)."""

    def __init__(self, engines: list[tuple[str, Any]]) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        lab = ["model_name"]
        self.ttft = Histogram(P + "time_to_first_token_seconds", "Time to first token.", lab, buckets=_LAT, registry=r)
        self.itl = Histogram(
            P + "inter_token_latency_seconds", "Time between output tokens.", lab, buckets=_LAT, registry=r
        )
        self.tpot = Histogram(
            P + "time_per_output_token_seconds", "(E2E - TTFT) / (tokens - 1).", lab, buckets=_LAT, registry=r
        )
        self.e2e = Histogram(
            P + "e2e_request_latency_seconds",
            "Request latency, arrival to end.",
            lab,
            buckets=_LAT,
            registry=r,
        )
        self.queue = Histogram(
            P + "request_queue_time_seconds",
            "Time waiting before first scheduling.",
            lab,
            buckets=_LAT,
            registry=r,
        )
        self.prompt_len = Histogram(
            P + "request_prompt_tokens", "Prompt tokens per request.", lab, buckets=_TOK, registry=r
        )
        self.gen_len = Histogram(
            P + "request_generation_tokens", "Generated tokens per request.", lab, buckets=_TOK, registry=r
        )
        self.success = Counter(
            P + "request_success",
            "Finished requests by finish reason.",
            lab + ["finished_reason"],
            registry=r,
        )
        self.prompt_tokens = Counter(P + "prompt_tokens", "Prefill tokens processed.", lab, registry=r)
        self.gen_tokens = Counter(P + "generation_tokens", "Generation tokens produced.", lab, registry=r)
        self.rejected = Counter(
            P + "http_requests_rejected", "Requests refused before the engine.", ["reason"], registry=r
        )
        self.http = Counter(
            P + "http_requests",
            "HTTP requests answered, by route and status.",
            ["route", "status"],
            registry=r,
        )
        r.register(_EngineCollector(engines))

    def render(self) -> bytes:
        return generate_latest(self.registry)
