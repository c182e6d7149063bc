"""Server configuration: what `tachyon serve` was asked to do, validated once at start-up.

`ServerConfig` holds the HTTP-side guards; `ModelEntry` one served model (engine arguments plus
the names it answers to). `load_models_yaml` reads `--config models.yaml`:

```yaml
models:
  - name: small                 # or a list: names: [small, default]
    model: /path/to/hf_dir
    dtype: float32
    max_model_len: 2048
    memory_share: 0.45          # fraction of the accelerator this model may use
    num_kv_blocks: 256          # any other EngineConfig field is passed through
```
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from limits import parse as parse_rate_limit

from tachyon.serving.tool_parsers import PARSERS


@dataclass
class ModelEntry:
    """One served model: the names it answers to and the EngineConfig keyword arguments."""

    names: list[str]
    engine_args: dict[str, Any]

    @property
    def name(self) -> str:
        return self.names[0]


@dataclass
class ServerConfig:
    """HTTP-side settings and guards. Every limit is enforced before work reaches the engine."""

    models: list[ModelEntry]
    host: str = "127.0.0.1"
    port: int = 8000
    api_key_hashes: list[str] = field(default_factory=list)  # sha256 hex of each accepted key
    rate_limit: str | None = None  # requests per key, `limits` notation: "60/minute"
    token_rate_limit: str | None = None  # tokens (prompt + completion) per key: "100000/minute"
    rate_limit_storage: str = "memory://"
    max_queue: int = 64  # requests admitted beyond the engines' running slots
    request_timeout: float = 600.0
    drain_timeout: float = 30.0
    max_body_bytes: int = 8 * 1024 * 1024
    max_header_bytes: int = 32 * 1024
    header_timeout: float = 10.0  # seconds for a request head to arrive
    body_timeout: float = 60.0  # seconds for a request body to arrive
    max_n: int = 16
    max_prompts: int = 64
    max_stop: int = 4
    max_stop_len: int = 256
    max_logprobs: int = 20
    health_probe_interval: float = 5.0
    health_probe_timeout: float = 30.0
    log_content: bool = False
    log_level: str = "info"
    tool_call_parser: str | None = None  # tool_choice "auto"'s parser: a name in serving/tool_parsers.py's PARSERS

    def __post_init__(self) -> None:
        if self.tool_call_parser is not None and self.tool_call_parser not in PARSERS:
            raise ValueError(f"tool_call_parser must be one of {sorted(PARSERS)} or unset, got "
                             f"{self.tool_call_parser!r}")
        if not self.models:
            raise ValueError("at least one model must be served")
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be in [0, 65535], got {self.port}")
        names = [n for m in self.models for n in m.names]
        if len(set(names)) != len(names):
            raise ValueError(f"served model names must be unique, got {names}")
        for spec in (self.rate_limit, self.token_rate_limit):
            if spec is not None:
                parse_rate_limit(spec)  # raises ValueError on bad notation
        for name in ("max_queue", "max_n", "max_prompts", "max_stop", "max_body_bytes", "max_header_bytes"):
            if getattr(self, name) < (0 if name == "max_queue" else 1):
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        for name in (
            "request_timeout",
            "drain_timeout",
            "health_probe_interval",
            "health_probe_timeout",
            "header_timeout",
            "body_timeout",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        for h in self.api_key_hashes:
            if len(h) != 64 or any(c not in "0123456789abcdef" for c in h):
                raise ValueError("hashed API keys must be 64 lowercase sha256 hex digits")


def hash_key(key: str) -> str:
    """sha256 hex of an API key: the only form in which keys are kept in memory after start-up."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def read_key_file(path: str) -> list[str]:
    """Hashed keys, one sha256 hex digest per line; blank lines and `#` comments are skipped."""
    out = []
    for raw in Path(path).read_text().splitlines():
        line = raw.split("#", 1)[0].strip().lower()
        if line:
            out.append(line)
    return out


_ENTRY_KEYS = {"name", "names", "model", "memory_share"}


def load_models_yaml(path: str, defaults: dict[str, Any]) -> list[ModelEntry]:
    """Parse a models.yaml; each entry's engine arguments start from `defaults` (the CLI flags)."""
    import yaml

    data = yaml.safe_load(Path(path).read_text()) or {}
    items = data.get("models") if isinstance(data, dict) else data
    if not isinstance(items, list) or not items:
        raise ValueError(f"{path}: expected a non-empty `models:` list")
    entries = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or "model" not in item:
            raise ValueError(f"{path}: models[{i}] needs at least a `model` path")
        names = item.get("names") or [item.get("name") or str(item["model"])]
        if isinstance(names, str):
            names = [names]
        args = dict(defaults)
        args.update({k: v for k, v in item.items() if k not in _ENTRY_KEYS})
        args["model"] = str(item["model"])
        if "memory_share" in item:
            share = float(item["memory_share"])
            if not 0 < share <= 1:
                raise ValueError(f"{path}: models[{i}].memory_share must be in (0, 1], got {share}")
            args["gpu_memory_utilization"] = share
        args["served_model_name"] = names[0]
        entries.append(ModelEntry(names=[str(n) for n in names], engine_args=args))
    return entries
