"""Every Triton kernel variant the engine launches compiles with the real Triton pipeline down to a cubin
(benchmarks/kernels/compile_check.py, meta tensors, no GPU): for sm_90 (the H200 fast path, FP8 included) and
for sm_80 (A100-class GPUs: the bf16 path). The CPU interpreter runs the kernels' arithmetic but not the
compiler's type and layout rules, which have rejected code that passed it (stop 18's FP8 decode kernel)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "kernels" / "compile_check.py"


def _triton_can_compile() -> bool:
    try:
        import triton  # noqa: F401
        from triton.backends.nvidia import compiler  # noqa: F401
    except Exception:
        return False
    return (Path(compiler.__file__).parent / "bin" / "ptxas").exists()


@pytest.mark.skipif(not _triton_can_compile(), reason="triton with its NVIDIA backend and ptxas is not installed")
def test_every_kernel_variant_compiles():
    """Both targets compile at once, one process each (a cold Triton cache takes ~2 min of one core for both)."""
    env = dict(os.environ, TRITON_INTERPRET="0", PYTHONPATH=str(ROOT))
    targets = {90: 110, 80: 80}  # arch: at least this many variants
    procs = {arch: subprocess.Popen([sys.executable, str(SCRIPT), "--arch", str(arch)], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT) for arch in targets}
    outs = {arch: p.communicate(timeout=900) for arch, p in procs.items()}
    for arch, at_least in targets.items():
        out, err = outs[arch]
        m = re.search(rf"sm_{arch}: (\d+) kernel variants compiled, (\d+) failed", out)
        assert m, f"sm_{arch}: no summary line; rc {procs[arch].returncode}\n{out[-2000:]}\n{err[-3000:]}"
        compiled, failed = int(m[1]), int(m[2])
        fails = "\n".join(line for line in out.splitlines() if "FAIL" in line)
        assert failed == 0 and procs[arch].returncode == 0, (
            f"{failed} of {compiled} variants failed for sm_{arch}:\n{fails}")
        assert compiled >= at_least, f"only {compiled} variants were compiled for sm_{arch}"
