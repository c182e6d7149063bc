"""`tachyon` command line. Each layer registers its own sub-commands through a `register(subparsers)`
function (engine: generate/chat/demo; serving: serve; bench: bench/plan; eval: eval)."""

from __future__ import annotations

import argparse
import importlib
import sys

_REGISTRARS = (
    "tachyon.engine.cli",
    "tachyon.serving.cli",
    "tachyon.bench.cli",
    "tachyon.eval.cli",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tachyon", description="Tachyon: fast LLM inference")
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", required=True)
    for mod_name in _REGISTRARS:
        try:
            mod = importlib.import_module(mod_name)
        except ModuleNotFoundError as e:  # a layer whose optional extra is not installed
            if e.name and e.name.startswith("tachyon"):
                continue
            raise
        mod.register(sub)
    return parser


def _version() -> str:
    """`tachyon X (torch Y, triton Z or none, Python W)`: what a bug report needs first."""
    import platform

    import torch

    from tachyon import __version__

    try:
        import triton

        tv = triton.__version__
    except ImportError:
        tv = "none"
    return f"tachyon {__version__} (torch {torch.__version__}, triton {tv}, Python {platform.python_version()})"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        rc = args.func(args)
    except ValueError as e:  # bad input: one clear line, no traceback
        print(f"tachyon {args.command}: error: {e}", file=sys.stderr)
        return 2
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
