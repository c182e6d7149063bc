"""The batch-1 layer kernel's A/B knobs (layer_bs1.py, model_bs1.py): environment variables read per forward or per
launch, so a CUDA graph keeps what was in force at capture. A malformed value is a ValueError naming the variable and
what it may be."""

from __future__ import annotations

import os

import torch

# warps per program. Compiled for sm_90 by Triton 3.6 at the Qwen3-0.6B shape (compile_check.py's way), one launch:
# 16 warps 128 registers, 8 warps 182 (254 with the early weight prefetch), no spills; 70 KiB of shared memory
LAYER_BS1_WARPS = 16
_WARPS = ("4", "8", "16")


def _choice(name: str, choices: tuple[str, ...], default: str) -> str:
    """os.environ[name] (default when unset or empty), one of `choices`."""
    env = os.environ.get(name, "") or default
    if env not in choices:
        raise ValueError(f"{name} must be {', '.join(choices[:-1])} or {choices[-1]}, got {env!r}")
    return env


# The default form by GPU name (Qwen3-0.6B bs1, `bench offline`, medians of 5 runs): on H100s "phases" beat "off" by
# 8.4-9.0% (stop 56, benchmarks/results/session46/); on an H200 (GPU-02c7ca18, stop 60, session49/h200/) it lost by
# 1.1-1.5%: 1,496.5 / 1,494.6 against 1,512.9 / 1,516.7 tok/s ("fused" 1,081.1, "model" 906.0). The H100s measured
# were SXM boards ("NVIDIA H100 80GB HBM3"); a GPU whose name matches none of these (H100 PCIe and NVL included) was
# never measured and keeps the ten-kernel path.
LAYER_BS1_DEFAULT_BY_GPU = (("H100 80GB HBM3", "phases"),)


def default_layer_bs1_mode(device: torch.device) -> str:
    """The form TACHYON_LAYER_BS1 left unset gives on `device`: LAYER_BS1_DEFAULT_BY_GPU's entry for the first key
    in the CUDA device's name, else "off"; "phases" off CUDA (the CPU runs the kernel only under Triton's interpreter,
    where the tests drive it)."""
    if device.type != "cuda":
        return "phases"
    name = torch.cuda.get_device_name(device)  # torch keeps each device's properties after the first query
    return next((mode for key, mode in LAYER_BS1_DEFAULT_BY_GPU if key in name), "off")


def layer_bs1_mode(device: torch.device) -> str:
    """TACHYON_LAYER_BS1, else default_layer_bs1_mode(device): "phases" (the kernel as five launches, one per phase,
    no grid barrier, the projections on two programs a multiprocessor), "off" (the layer's ten-kernel path), "fused"
    (one launch per layer, grid barriers: 19% slower than "phases" on an H100) or "model" (every layer in one launch,
    model_bs1.py: 20-33% slower there; a layer run on its own then takes "fused"). Shapes that do not fit
    (layer_bs1_fits) take "off" whatever is asked. Read per forward."""
    return _choice("TACHYON_LAYER_BS1", ("off", "fused", "phases", "model"), default_layer_bs1_mode(device))


def layer_bs1_warps() -> int:
    """Warps per program: LAYER_BS1_WARPS, or TACHYON_LAYER_BS1_WARPS (4, 8 or 16). Read per launch."""
    return int(_choice("TACHYON_LAYER_BS1_WARPS", _WARPS, str(LAYER_BS1_WARPS)))


def layer_bs1_phase_warps() -> tuple[int, ...] | None:
    """Warps of each of the five launches in the five-launch form, TACHYON_LAYER_BS1_PHASE_WARPS="w0:w1:w2:w3:w4"
    (each 4, 8 or 16), or None: every launch takes layer_bs1_warps(). Read per launch."""
    env = os.environ.get("TACHYON_LAYER_BS1_PHASE_WARPS", "")
    if not env:
        return None
    parts = env.split(":")
    if len(parts) != 5 or any(p not in _WARPS for p in parts):
        raise ValueError(f"TACHYON_LAYER_BS1_PHASE_WARPS must be five of 4, 8 or 16 joined by ':', got {env!r}")
    return tuple(int(p) for p in parts)


def layer_bs1_gemv_programs() -> int:
    """In the five-launch form, the projection launches' (phases 0, 2, 3, 4) programs per multiprocessor:
    TACHYON_LAYER_BS1_GEMV_PROGRAMS (2 default: half the rows per program, +5-9% on Qwen3-0.6B bs1 over 1 on an
    H100, stop 56; 1 or 4). The attention launch keeps one a multiprocessor. Read per launch."""
    return int(_choice("TACHYON_LAYER_BS1_GEMV_PROGRAMS", ("1", "2", "4"), "2"))


def layer_bs1_prefetch() -> str:
    """When a program loads its weight rows: "next" (default: each phase's rows before the barrier that precedes it)
    or "early" (gate|up's with o_proj's, before the barrier after attention, and down's right after o_proj's are
    used: more of the layer's bytes stream during the latency-bound attention, at the cost of registers held
    longer). TACHYON_LAYER_BS1_PREFETCH, read per launch."""
    return _choice("TACHYON_LAYER_BS1_PREFETCH", ("next", "early"), "next")


def layer_bs1_early_tile() -> bool:
    """Whether each program loads its attention item's first tile of cached keys at the launch's start (when every
    program has at most one item): on unless TACHYON_LAYER_BS1_EARLY_TILE=0. Read per launch."""
    return _choice("TACHYON_LAYER_BS1_EARLY_TILE", ("0", "1"), "1") == "1"
