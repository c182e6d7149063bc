"""`tachyon serve`: the OpenAI-compatible server, with vLLM's flag names where they exist."""

from __future__ import annotations

import argparse
import logging
import os
import time
from typing import Any

from tachyon.config import OVERLAP_CHOICES, OVERLAP_HELP
from tachyon.serving.config import ModelEntry, ServerConfig, hash_key, load_models_yaml, read_key_file
from tachyon.serving.tool_parsers import PARSERS

_ENGINE_FLAGS = (
    "tokenizer",
    "max_model_len",
    "gpu_memory_utilization",
    "max_num_seqs",
    "max_num_batched_tokens",
    "dtype",
    "device",
    "load_format",
    "num_kv_blocks",
    "kv_cache_memory_gb",
    "block_size",
    "seed",
    "prefill_graph_max_tokens",
    "mixed_graph_max_tokens",
    "quantization",
    "kv_cache_dtype",
    "long_prefill_token_threshold",
)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "serve",
        help="OpenAI-compatible HTTP server",
        description="Serve models over the OpenAI API (chat, completions, models).",
    )
    p.add_argument("model_tag", nargs="?", default=None, help="model (same as --model)")
    m = p.add_argument_group("model and engine")
    m.add_argument("--model", default=None, help="HF dir, hub name or GGUF file (default: SmolLM2-135M-Instruct)")
    m.add_argument("--tokenizer", default=None)
    m.add_argument("--served-model-name", nargs="+", default=None, help="name(s) clients use in `model`")
    m.add_argument("--config", default=None, help="models.yaml listing several models (see docs)")
    m.add_argument("--max-model-len", type=int, default=None)
    m.add_argument("--gpu-memory-utilization", type=float, default=None)
    m.add_argument("--max-num-seqs", type=int, default=None)
    m.add_argument("--max-num-batched-tokens", type=int, default=None)
    m.add_argument("--dtype", default=None)
    m.add_argument("--device", default=None)
    m.add_argument("--load-format", default=None)
    m.add_argument("--num-kv-blocks", type=int, default=None)
    m.add_argument("--kv-cache-memory-gb", type=float, default=None)
    m.add_argument("--block-size", type=int, default=None)
    m.add_argument("--seed", type=int, default=None)
    m.add_argument("--long-prefill-token-threshold", type=int, default=None,
                   help="while a shorter prompt waits, a prompt computes at most this many tokens a step, so a "
                        "long prompt does not hold up short ones' first token (0: off; default a quarter of "
                        "--max-num-batched-tokens, 512 at its default)")
    m.add_argument("--enforce-eager", action="store_true", default=None)
    m.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction, default=None,
                   help="share the KV of leading full blocks that earlier requests computed (same tokens from the "
                        "first on: system prompts, chat history) instead of recomputing it (off by default: greedy "
                        "output may then depend on earlier requests)")
    m.add_argument("--prefill-graph-max-tokens", type=int, default=None,
                   help="prefill / mixed steps up to this many tokens replay CUDA graphs (0: eager; default 512)")
    m.add_argument("--mixed-graph-max-tokens", type=int, default=None,
                   help="mixed steps (decodes plus one prompt chunk of up to this many tokens) replay CUDA graphs "
                        "(0: eager; default 1024)")
    m.add_argument("--quantization", default=None, choices=["fp8"],
                   help="fp8: W8A8 decoder projections (FP8 e4m3 weights, per-row dynamic activation scales)")
    m.add_argument("--overlap-scheduling", default=None, choices=sorted(OVERLAP_CHOICES), help=OVERLAP_HELP)
    m.add_argument("--kv-cache-dtype", default=None, choices=["auto", "fp8"],
                   help="fp8: the KV cache in e4m3 (scale 1; half the bytes per token). auto: the model dtype")
    s = p.add_argument_group("HTTP server and guards")
    s.add_argument("--host", default="127.0.0.1", help="bind address (default loopback only)")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument(
        "--api-key",
        action="append",
        default=None,
        help="accepted API key (repeatable; also $TACHYON_API_KEY). Prefer --api-key-file",
    )
    s.add_argument("--api-key-file", default=None, help="file of sha256 hex digests of accepted keys, one a line")
    s.add_argument("--rate-limit", default=None, help="requests per API key, e.g. 60/minute")
    s.add_argument("--token-rate-limit", default=None, help="tokens per API key, e.g. 100000/minute")
    s.add_argument("--rate-limit-storage", default="memory://", help="`limits` storage URI, e.g. redis://host")
    s.add_argument("--max-queue", type=int, default=64, help="requests admitted beyond the running slots")
    s.add_argument("--request-timeout", type=float, default=600.0, help="seconds per request")
    s.add_argument("--drain-timeout", type=float, default=30.0, help="seconds to finish streams on SIGTERM")
    s.add_argument("--max-body-mb", type=float, default=8.0, help="largest request body")
    s.add_argument("--max-header-kb", type=float, default=32.0, help="largest request head")
    s.add_argument("--header-timeout", type=float, default=10.0, help="seconds for a request head to arrive")
    s.add_argument("--body-timeout", type=float, default=60.0, help="seconds for a request body to arrive")
    s.add_argument("--max-n", type=int, default=16, help="largest `n`")
    s.add_argument("--tool-call-parser", choices=sorted(PARSERS), default=None,
                   help="accept tool_choice 'auto' and parse the model's calls: hermes (<tool_call> blocks: Qwen2.5, "
                        "Qwen3, Hermes), llama3_json (Llama 3.1+), mistral ([TOOL_CALLS]: Mistral, Mixtral) or "
                        "pythonic ([f(x=1)]: Llama 3.2, Llama 4)")
    s.add_argument("--log-content", action="store_true", help="log prompt and completion text (off by default)")
    s.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    p.set_defaults(func=run)


def _entries(args: argparse.Namespace) -> list[ModelEntry]:
    engine: dict[str, Any] = {k: getattr(args, k) for k in _ENGINE_FLAGS if getattr(args, k) is not None}
    if args.enforce_eager:
        engine["enforce_eager"] = True
    if args.enable_prefix_caching is not None:
        engine["enable_prefix_caching"] = args.enable_prefix_caching
    if args.overlap_scheduling not in (None, "auto"):
        engine["overlap_scheduling"] = OVERLAP_CHOICES[args.overlap_scheduling]
    if args.config:
        return load_models_yaml(args.config, engine)
    model = args.model or args.model_tag
    names = args.served_model_name or [model or "SmolLM2-135M-Instruct"]
    engine["model"] = model
    engine["served_model_name"] = names[0]
    return [ModelEntry(names=names, engine_args=engine)]


def build_config(args: argparse.Namespace) -> ServerConfig:
    keys = list(args.api_key or [])
    if not keys and os.environ.get("TACHYON_API_KEY"):
        keys.append(os.environ["TACHYON_API_KEY"])
    hashes = [hash_key(k) for k in keys]
    if args.api_key_file:
        hashes += read_key_file(args.api_key_file)
    return ServerConfig(
        models=_entries(args),
        host=args.host,
        port=args.port,
        api_key_hashes=hashes,
        rate_limit=args.rate_limit,
        token_rate_limit=args.token_rate_limit,
        rate_limit_storage=args.rate_limit_storage,
        max_queue=args.max_queue,
        request_timeout=args.request_timeout,
        drain_timeout=args.drain_timeout,
        max_body_bytes=int(args.max_body_mb * 1024 * 1024),
        max_header_bytes=int(args.max_header_kb * 1024),
        header_timeout=args.header_timeout,
        body_timeout=args.body_timeout,
        max_n=args.max_n,
        tool_call_parser=args.tool_call_parser,
        log_content=args.log_content,
        log_level=args.log_level,
    )


def run(args: argparse.Namespace) -> int:
    from tachyon.engine.heap import freeze_heap
    from tachyon.serving.registry import ModelRegistry, build_served_model
    from tachyon.serving.reqlog import configure_logging
    from tachyon.serving.server import listen_socket, serve
    from tachyon.serving.state import ServerState

    args.api_key = list(args.api_key or [])
    config = build_config(args)
    args.api_key = None  # keep keys out of anything that might print args later
    configure_logging(config.log_level)
    log = logging.getLogger("tachyon.serving")
    if config.host not in ("127.0.0.1", "localhost", "::1") and not config.api_key_hashes:
        log.warning("binding beyond loopback without API keys: anyone who can reach the port can use it")
    sock = listen_socket(config.host, config.port)  # before the models load: a taken port fails at once
    try:
        created = int(time.time())
        models = []
        for entry in config.models:
            log.info("loading model", extra={"model": entry.name})
            models.append(build_served_model(entry, created))
        frozen = freeze_heap()  # later collections skip the start-up heap (engine.heap)
        log.info("start-up heap frozen", extra={"objects": frozen})
    except BaseException:
        sock.close()
        raise
    return serve(ServerState.build(config, ModelRegistry(models)), sock)


def main(argv: list[str] | None = None) -> int:
    """`python -m tachyon.serving [serve] ...`: the serve command without the other layers' CLIs."""
    parser = argparse.ArgumentParser(prog="tachyon")
    register(parser.add_subparsers(dest="command", required=True))
    argv = list(argv if argv is not None else __import__("sys").argv[1:])
    if not argv or argv[0] != "serve":
        argv.insert(0, "serve")
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)
