"""Everything a request handler needs, held once per app (`app.state.tachyon`)."""

from __future__ import annotations

from dataclasses import dataclass

from tachyon.serving.admission import Admission
from tachyon.serving.auth import KeyStore
from tachyon.serving.config import ServerConfig
from tachyon.serving.health import Readiness
from tachyon.serving.metrics import ServerMetrics
from tachyon.serving.ratelimit import RateLimiter
from tachyon.serving.registry import ModelRegistry


@dataclass
class ServerState:
    config: ServerConfig
    registry: ModelRegistry
    keys: KeyStore
    limiter: RateLimiter
    admission: Admission
    metrics: ServerMetrics
    readiness: Readiness

    @classmethod
    def build(cls, config: ServerConfig, registry: ModelRegistry) -> ServerState:
        metrics = ServerMetrics([(m.name, m.engine) for m in registry.models])
        capacity = sum(_max_num_seqs(m.engine) for m in registry.models) + config.max_queue
        admission = Admission(capacity)
        return cls(
            config=config,
            registry=registry,
            keys=KeyStore(config.api_key_hashes),
            limiter=RateLimiter(config.rate_limit, config.token_rate_limit, config.rate_limit_storage),
            admission=admission,
            metrics=metrics,
            readiness=Readiness(registry, admission, config.health_probe_interval, config.health_probe_timeout),
        )


def _max_num_seqs(engine: object) -> int:
    for holder in (engine, getattr(engine, "config", None), getattr(engine, "engine_config", None)):
        v = getattr(holder, "max_num_seqs", None) if holder is not None else None
        if isinstance(v, int) and v > 0:
            return v
    return 256
