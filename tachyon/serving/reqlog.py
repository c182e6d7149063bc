"""Structured logging: every log record as one JSON line; one access line per API request.

Access lines carry ids, counts and timings only. Prompt and completion text appear only when
the operator passed `--log-content` (then under `prompt` / `completion`).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any

access_logger = logging.getLogger("tachyon.serving.access")

_STD_ATTRS = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """`{"ts", "level", "logger", "msg", ...extra}` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for k, v in vars(record).items():
            if k not in _STD_ATTRS and not k.startswith("_") and k != "color_message":
                out[k] = v
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, ensure_ascii=False)


def configure_logging(level: str) -> None:
    """Root logger -> stderr as JSON at `level`; uvicorn's own access log off (ours replaces it)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
    logging.getLogger("uvicorn.access").disabled = True
    for noisy in ("httpx", "httpcore", "urllib3", "filelock", "asyncio"):
        logging.getLogger(noisy).setLevel(max(logging.INFO, root.level))


@dataclass
class RequestRecord:
    """What one access line says about a request."""

    request_id: str
    route: str
    key_id: str | None = None
    model: str | None = None
    status: int = 200
    stream: bool = False
    n: int = 1
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None
    error_code: str | None = None
    queue_time: float | None = None
    ttft: float | None = None
    duration: float | None = None
    start: float = field(default_factory=time.monotonic)
    content: dict[str, Any] | None = None  # only with --log-content

    def emit(self) -> None:
        self.duration = round(time.monotonic() - self.start, 4)
        data = asdict(self)
        data.pop("start")
        if data["content"] is None:
            data.pop("content")
        for k in ("queue_time", "ttft"):
            if data[k] is not None:
                data[k] = round(data[k], 4)
        access_logger.info("request", extra=data)
