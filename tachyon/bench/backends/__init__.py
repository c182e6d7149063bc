"""Offline generation backends behind one interface (see base.py); `get_backend(name, opts)`."""

from __future__ import annotations

from tachyon.bench.backends.base import Backend, BackendOptions, BackendRun


def get_backend(name: str, opts: BackendOptions) -> Backend:
    if name == "tachyon":
        from tachyon.bench.backends.tachyon_engine import TachyonBackend

        return TachyonBackend(opts)
    if name == "hf":
        from tachyon.bench.backends.hf import HFBackend

        return HFBackend(opts)
    if name == "vllm":
        from tachyon.bench.backends.vllm_engine import VLLMBackend

        return VLLMBackend(opts)
    raise ValueError(f"unknown backend {name!r}: choose tachyon, hf or vllm")


__all__ = ["Backend", "BackendOptions", "BackendRun", "get_backend"]
