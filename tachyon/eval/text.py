"""Default evaluation text, generated offline and deterministically from the Python standard library's
docstrings (same Python version -> same text). Contract: `default_text(max_chars)` -> str."""

from __future__ import annotations

import importlib
import inspect

MODULES = ("textwrap", "json", "functools", "itertools", "collections", "string", "heapq", "bisect",
           "fractions", "statistics", "pathlib", "shlex", "difflib", "calendar", "argparse")


def _docs(mod_name: str) -> list[str]:
    mod = importlib.import_module(mod_name)
    out = []
    doc = inspect.getdoc(mod)
    if doc:
        out.append(f"{mod_name}\n\n{doc}")
    for name in sorted(getattr(mod, "__all__", None) or dir(mod)):
        if name.startswith("_"):
            continue
        obj = getattr(mod, name, None)
        if not (inspect.isfunction(obj) or inspect.isclass(obj) or inspect.isbuiltin(obj)):
            continue
        d = inspect.getdoc(obj)
        if d and len(d) > 80:
            out.append(f"{mod_name}.{name}\n\n{d}")
    return out


def default_text(max_chars: int = 20000) -> str:
    parts: list[str] = []
    total = 0
    for m in MODULES:
        for d in _docs(m):
            parts.append(d)
            total += len(d) + 2
            if total >= max_chars:
                return "\n\n".join(parts)[:max_chars]
    return "\n\n".join(parts)[:max_chars]
