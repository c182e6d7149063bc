"""Remembered kernel choices of the warm-up (`tune_gemv`), so a start-up only times and compiles the
candidates of shapes never seen on this GPU model.

Contract: `lookup(key)` returns (True, choice) for a known key — the choice may be None (cuBLAS) — or
(False, None); `remember(key, choice)` records a fresh measurement in the user cache
(~/.cache/tachyon/kernel_tuning.json, or $TACHYON_CACHE_DIR; written atomically, best effort). A key
names the GPU model, torch and triton versions, the candidate lists of its kind (a fingerprint:
changing them invalidates that kind's entries), dtype, weight shape, bias, prologue and row count.
Lookups consult, in order: the shipped table's `step_overrides` (choices measured in whole decode-step
replays, where a kernel overlaps its neighbours under PDL, which the per-weight timing cannot show; each
names its evidence), the user cache, then the shipped `entries` (tachyon/kernels/tuned/<gpu>.json,
measured with the same fingerprints). TACHYON_RETUNE=1 ignores all three.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
from pathlib import Path

import torch

from tachyon._files import write_text_atomic

_USER: dict[str, object] | None = None
_SHIPPED: dict[str, dict[str, object]] = {}
_STEP: dict[str, dict[str, object]] = {}


def fingerprint(kind: str = "m1") -> str:
    """Hash of the candidate lists a decision of this kind was made among, and the kernels' version:
    entries measured against other candidates or older kernel code are not reused. Kinds: "m1" (GEMV),
    "m1+<prologue>" (fused GEMV, chosen against the plain one), "m<SMALL_M>" (skinny GEMM); for FP8 weights
    "m1fp8" and "m<SMALL_M>fp8[fast]" (quant_fp8.py's candidates, the fast-accumulation ones with "fast")."""
    gemv = importlib.import_module("tachyon.kernels.gemv")  # the module (the package exports a function `gemv`)
    small = importlib.import_module("tachyon.kernels.gemm_small")
    q8 = importlib.import_module("tachyon.kernels.quant_fp8")
    if kind == "m1":
        lists: tuple = (gemv.CONFIGS, gemv.KERNEL_VERSION)
    elif kind == "m1fp8":
        lists = (q8.FP8_GEMV_CONFIGS, gemv.KERNEL_VERSION)
    elif "fp8" in kind:
        fast = q8.FP8_SMALL_FAST_CONFIGS if kind.endswith("fast") else ()
        lists = (q8.FP8_SMALL_CONFIGS, fast, small.SMALL_M, gemv.KERNEL_VERSION)
    elif kind.startswith("m1+"):
        lists = (gemv.CONFIGS, gemv.FUSED_CONFIGS, gemv.KERNEL_VERSION)
    else:
        lists = (small.SMALL_CONFIGS, small.SMALL_M, gemv.KERNEL_VERSION)
    return hashlib.sha1(repr(lists).encode()).hexdigest()[:12]


def device_tag(device: torch.device) -> str:
    return torch.cuda.get_device_name(device).replace(" ", "_")


def make_key(w: torch.Tensor, bias: bool, kind: str) -> str:
    """Versioned key of one tuning decision; `kind` is "m1", "m8", "m1+rmsnorm" or "m1+silu"."""
    import triton

    tv = ".".join(triton.__version__.split(".")[:2])
    tt = ".".join(torch.__version__.split(".")[:2])
    dt = str(w.dtype).removeprefix("torch.")
    return f"{fingerprint(kind)}|torch{tt}|triton{tv}|{dt}|{w.shape[0]}x{w.shape[1]}|bias={int(bias)}|{kind}"


def _user_path() -> Path:
    root = os.environ.get("TACHYON_CACHE_DIR") or Path.home() / ".cache" / "tachyon"
    return Path(root) / "kernel_tuning.json"


def _user() -> dict[str, object]:
    global _USER
    if _USER is None:
        try:
            _USER = json.loads(_user_path().read_text())
        except (OSError, ValueError):
            _USER = {}
    return _USER


def _load_shipped(tag: str) -> None:
    path = Path(__file__).parent / "tuned" / f"{tag}.json"
    try:
        table = json.loads(path.read_text())
    except (OSError, ValueError):
        table = {}
    _SHIPPED[tag] = table.get("entries", {})
    _STEP[tag] = {k: v["choice"] for k, v in table.get("step_overrides", {}).items()}


def _shipped(tag: str) -> dict[str, object]:
    if tag not in _SHIPPED:
        _load_shipped(tag)
    return _SHIPPED[tag]


def _step_overrides(tag: str) -> dict[str, object]:
    if tag not in _STEP:
        _load_shipped(tag)
    return _STEP[tag]


def lookup(tag: str, key: str) -> tuple[bool, tuple | None]:
    if os.environ.get("TACHYON_RETUNE", "0") == "1":
        return False, None
    for table in (_step_overrides(tag), _user().get(tag, {}), _shipped(tag)):
        if key in table:
            v = table[key]
            return True, (tuple(v) if v is not None else None)
    return False, None


def remember(tag: str, key: str, choice: tuple | None) -> None:
    user = _user()
    user.setdefault(tag, {})[key] = list(choice) if choice is not None else None
    path = _user_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, json.dumps(user, indent=1, sort_keys=True))
    except OSError:
        pass  # a read-only home only costs the next start its tuning time
