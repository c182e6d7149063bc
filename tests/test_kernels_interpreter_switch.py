"""When tachyon.kernels turns on Triton's interpreter: whenever no GPU is usable, whatever torch was built for.

A CUDA build of torch on a machine without a GPU (what `pip install torch` gives on Linux) used to leave the
interpreter off, so every Triton kernel test failed with "0 active drivers". Each case runs in a fresh
interpreter: Triton reads the variable once, at import.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROBE = """
import os, sys, torch
torch.version.cuda = {cuda!r}
torch.cuda.is_available = lambda: {available}
import tachyon.kernels._triton
print(os.environ.get("TRITON_INTERPRET", "unset"))
"""


@pytest.mark.parametrize(("cuda", "available", "preset", "expected"), [
    ("13.0", False, None, "1"),  # CUDA build, no GPU: the case that broke
    (None, False, None, "1"),  # CPU-only build
    ("13.0", True, None, "unset"),  # a GPU: compiled kernels
    ("13.0", False, "0", "0"),  # an explicit choice is kept (compile_check.py compiles cubins without a GPU)
])
def test_interpreter_on_exactly_when_no_gpu_is_usable(cuda, available, preset, expected):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    if preset is not None:
        env["TRITON_INTERPRET"] = preset
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run([sys.executable, "-c", PROBE.format(cuda=cuda, available=available)], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == expected
