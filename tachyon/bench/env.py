"""Environment capture for results: GPU, driver, CUDA, library versions, git sha, source digest. Never raises.

$TACHYON_GIT_SHA, when set, names the sha (a copied tree on a remote GPU may carry no .git, or a stale one);
otherwise `git rev-parse HEAD`. The source digest fingerprints the code that actually ran, whatever the sha says:
recompute it at a checkout with `python -c "from tachyon.bench.env import source_digest; print(source_digest())"`."""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import os
import platform
import subprocess
from pathlib import Path

from tachyon.bench.schema import Environment


def _version(dist: str) -> str | None:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


def _tachyon_version() -> str | None:
    try:
        import tachyon

        return tachyon.__version__
    except Exception:
        return None


def _git(*args: str) -> str | None:
    root = Path(__file__).resolve().parents[2]
    try:
        out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def source_digest(root: Path | None = None) -> str | None:
    """16 hex digits of SHA-256 over the package's source (every .py and .json under `root`, default the installed
    tachyon package: each file's relative path and bytes, in path order). None if the files cannot be read."""
    root = Path(__file__).resolve().parents[1] if root is None else Path(root)
    h = hashlib.sha256()
    try:
        files = sorted(p for p in root.rglob("*") if p.suffix in (".py", ".json") and p.is_file())
        for p in files:
            h.update(p.relative_to(root).as_posix().encode() + b"\0")
            h.update(p.read_bytes() + b"\0")
    except OSError:
        return None
    return h.hexdigest()[:16] if files else None


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _driver() -> str | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        v = pynvml.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else str(v)
    except Exception:
        return None


def _board() -> dict | None:
    """The measured GPU's identity and limits from NVML (the one `GpuMeter` reads: `gpu.nvml_handle`); each field
    None where NVML does not give it, None without NVML."""
    from tachyon.bench.gpu import nvml_handle

    pynvml, h = nvml_handle()
    if h is None:
        return None

    def ask(fn, *args):
        try:
            v = getattr(pynvml, fn)(h, *args)
        except Exception:
            return None
        return v.decode() if isinstance(v, bytes) else v

    limit_mw = ask("nvmlDeviceGetEnforcedPowerLimit")
    return {"uuid": ask("nvmlDeviceGetUUID"), "serial": ask("nvmlDeviceGetSerial"),
            "power_limit_w": None if limit_mw is None else limit_mw / 1000,
            "sm_clock_max_mhz": ask("nvmlDeviceGetMaxClockInfo", getattr(pynvml, "NVML_CLOCK_SM", 1)),
            "mem_clock_max_mhz": ask("nvmlDeviceGetMaxClockInfo", getattr(pynvml, "NVML_CLOCK_MEM", 2))}


def capture_env() -> Environment:
    env = Environment(python=platform.python_version(), platform=platform.platform(), cpu=_cpu(),
                      torch=_version("torch"), triton=_version("triton"),
                      transformers=_version("transformers"), vllm=_version("vllm"),
                      tachyon=_version("tachyon") or _tachyon_version())
    override = os.environ.get("TACHYON_GIT_SHA")
    sha = None if override else _git("rev-parse", "HEAD")
    env.git_sha = override or sha
    env.knobs = {k: v for k, v in sorted(os.environ.items()) if k.startswith("TACHYON_") and k != "TACHYON_GIT_SHA"}
    env.source_digest = source_digest()
    if sha:
        env.git_dirty = bool(_git("status", "--porcelain", "--untracked-files=no"))
    try:
        import torch

        env.cuda = torch.version.cuda
        if torch.cuda.is_available():
            env.gpu_count = torch.cuda.device_count()
            props = torch.cuda.get_device_properties(0)
            env.gpu, env.gpu_memory_gb = props.name, round(props.total_memory / 1e9, 2)
            env.driver = _driver()
            env.gpu_board = _board()
    except Exception:
        pass
    return env
