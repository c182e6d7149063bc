"""Served models: one engine, its tokenizer and its context length per `ModelEntry`, found by name.

The engine class is `tachyon.engine.async_engine.AsyncEngine`; `TACHYON_ENGINE_CLASS`
("module:Class", same constructor and API) swaps it, for development and tests only.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from typing import Any

from tachyon.serving.config import ModelEntry
from tachyon.serving.errors import APIError


def _engine_class() -> Any:
    spec = os.environ.get("TACHYON_ENGINE_CLASS")
    if spec:
        mod, _, cls = spec.partition(":")
        return getattr(importlib.import_module(mod), cls)
    from tachyon.engine.async_engine import AsyncEngine

    return AsyncEngine


def _tokenizer_of(engine: Any, args: dict[str, Any]) -> Any:
    get = getattr(engine, "get_tokenizer", None)
    tok = get() if callable(get) else getattr(engine, "tokenizer", None)
    if tok is not None:
        return tok
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(args.get("tokenizer") or args["model"])


def _max_model_len_of(engine: Any, args: dict[str, Any], tokenizer: Any) -> int:
    for holder in (engine, getattr(engine, "config", None), getattr(engine, "engine_config", None)):
        value = getattr(holder, "max_model_len", None) if holder is not None else None
        if isinstance(value, int) and value > 0:
            return value
    if args.get("max_model_len"):
        return int(args["max_model_len"])
    return int(min(getattr(tokenizer, "model_max_length", 2048) or 2048, 1 << 20))


@dataclass
class ServedModel:
    """One engine as the server sees it. `max_token_chars` bounds how many characters one token spans."""

    names: list[str]
    engine: Any
    tokenizer: Any
    max_model_len: int
    created: int
    vocab_size: int = 0
    max_token_chars: int = 0
    prefix_caching: bool = False  # usage then reports prompt_tokens_details.cached_tokens
    _pieces: dict[int, str] = field(default_factory=dict, repr=False)

    @property
    def name(self) -> str:
        return self.names[0]

    def piece(self, token_id: int) -> str:
        """Text of one token on its own (cached; used for logprobs)."""
        text = self._pieces.get(token_id)
        if text is None:
            text = self.tokenizer.decode([token_id], skip_special_tokens=False)
            self._pieces[token_id] = text
        return text


def build_served_model(entry: ModelEntry, created: int) -> ServedModel:
    """Start the engine for `entry` (loads weights; blocking) and gather what requests need."""
    from tachyon.config import EngineConfig

    engine = _engine_class()(EngineConfig.from_kwargs(**entry.engine_args))
    tok = _tokenizer_of(engine, entry.engine_args)
    vocab = tok.get_vocab()
    longest = max((len(t) for t in vocab), default=1)
    return ServedModel(
        names=list(entry.names),
        engine=engine,
        tokenizer=tok,
        max_model_len=_max_model_len_of(engine, entry.engine_args, tok),
        created=created,
        vocab_size=max(len(tok), max(vocab.values(), default=0) + 1),
        max_token_chars=max(longest, 16) * 2,
        prefix_caching=engine.config.enable_prefix_caching,
    )


class ModelRegistry:
    """Name -> ServedModel. The first model answers requests that name none."""

    def __init__(self, models: list[ServedModel]) -> None:
        if not models:
            raise ValueError("no models")
        self.models = models
        self._by_name = {n: m for m in models for n in m.names}

    def get(self, name: str | None) -> ServedModel:
        if name is None or name == "":
            return self.models[0]
        model = self._by_name.get(name)
        if model is None:
            raise APIError(
                404,
                f"The model `{name[:200]}` does not exist; see GET /v1/models.",
                param="model",
                code="model_not_found",
            )
        return model

    def shutdown(self) -> None:
        for m in self.models:
            try:
                m.engine.shutdown()
            except Exception:  # noqa: BLE001 - best effort at exit
                pass
