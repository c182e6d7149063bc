"""Run one offline backend in a fresh child Python process (`python -m tachyon.bench.isolated IN OUT`).

Why: backends run one after another in one process share its device state: the allocator's cached segments, the
CUDA context, compiled kernels, the memory layout the next backend's allocations land in. A child process per backend
starts each from a clean process, as separate benchmark invocations would, and a backend that dies (OOM kill,
segfault) loses only its own run. (It does not decide Qwen3-0.6B bs1's ~2% slow mode: on session 23's H200 the
engine ran in it in all nine processes, isolated beside transformers or alone; docs/performance.md.)

Contract: `run_backend_isolated` pickles its arguments to a temporary file, runs the child with this interpreter and
the parent's environment (stdout / stderr inherited, so the backend's log lines show), and returns the child's `Run`
(its `config["pid"]`, set by `run_backend`, is the child's). The child owns the device for its lifetime; the parent
must not hold device memory the backend needs. A backend error in the child is raised again in the parent as the
same exception where it survives pickling (else a RuntimeError with its type and message); a child that dies without
a result (killed, crashed) raises RuntimeError naming its exit status. Temporary files are removed in every case.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

from tachyon.bench.backends import BackendOptions
from tachyon.bench.schema import Run
from tachyon.bench.workloads import Workload


def run_backend_isolated(name: str, opts: BackendOptions, workload: Workload, warmup: bool = True,
                         repeats: int = 1, warmup_max_tokens: int | None = None) -> Run:
    with tempfile.TemporaryDirectory(prefix="tachyon-bench-") as tmp:
        inp, out = Path(tmp) / "in.pkl", Path(tmp) / "out.pkl"
        inp.write_bytes(pickle.dumps((name, opts, workload, warmup, repeats, warmup_max_tokens)))
        proc = subprocess.run([sys.executable, "-m", "tachyon.bench.isolated", str(inp), str(out)], check=False)
        if not out.exists():
            raise RuntimeError(f"backend {name!r}: its child process exited with status {proc.returncode} "
                               "without a result")
        status, value, text = pickle.loads(out.read_bytes())
    if status == "ok":
        return value
    try:  # the child's own exception where it survives the trip (some exception types cannot be rebuilt)
        err = pickle.loads(value) if value is not None else None
    except Exception:  # noqa: BLE001
        err = None
    raise err if isinstance(err, Exception) else RuntimeError(text)


def _child(inp: Path, out: Path) -> int:
    from tachyon.bench.offline import run_backend

    name, opts, workload, warmup, repeats, warmup_max_tokens = pickle.loads(inp.read_bytes())
    try:
        result = ("ok", run_backend(name, opts, workload, warmup, lambda m: print(m, flush=True), repeats,
                                    warmup_max_tokens), None)
    except Exception as e:  # noqa: BLE001 - every backend error goes back to the parent, which decides
        try:
            blob = pickle.dumps(e)
        except Exception:  # noqa: BLE001 - an exception that cannot travel goes back as its text only
            blob = None
        result = ("error", blob, f"{type(e).__name__}: {e}")
    out.write_bytes(pickle.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(_child(Path(sys.argv[1]), Path(sys.argv[2])))
