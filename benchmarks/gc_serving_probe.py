"""Do Python's garbage collections pause a serving `tachyon serve`, and would freezing the start-up heap help?

Starts `tachyon serve` (tiny random model on CPU, the serving tests' engine arguments) twice: as is, and with
`gc.freeze()` after a full collection just before it starts listening. Since stop 21 the server freezes its heap
itself (engine.heap); the probe undoes that first, and only its freezing child freezes again. Each child logs every
collection's generation and duration; the parent streams N completions at concurrency 16 and prints the collections
after start-up by generation (count, total ms, longest ms), and the time of the full collection each child makes of
its start-up heap just before listening. Full collections scan every tracked object, so what matters is how often
one comes.

Usage (repo root): python benchmarks/gc_serving_probe.py [N]
"""

from __future__ import annotations

import concurrent.futures as cf
import gc
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def child(argv: list[str]) -> int:
    """`tachyon serve argv`, logging collections (generation, ms, when) to $GCLOG at exit."""
    import atexit

    import tachyon.serving.cli as cli
    import tachyon.serving.server as server

    rec: list[tuple[int, float, float]] = []
    state: dict = {}

    def on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            state["t"] = time.perf_counter()
        elif "t" in state:
            rec.append((info["generation"], (time.perf_counter() - state.pop("t")) * 1e3, time.perf_counter()))

    gc.callbacks.append(on_gc)
    atexit.register(lambda: Path(os.environ["GCLOG"]).write_text(json.dumps(
        {"collections": rec, "ready": state.get("ready"), "tracked_at_ready": state.get("tracked"),
         "full_collection_ms": state.get("full_ms")})))
    serve = server.serve  # run() imports it from tachyon.serving.server when it is called

    def serve_logged(server_state):
        gc.unfreeze()  # `tachyon serve` froze its heap before this (engine.heap): the probe decides
        t = time.perf_counter()
        gc.collect()
        state["full_ms"] = (time.perf_counter() - t) * 1e3
        if os.environ.get("FREEZE") == "1":
            gc.freeze()
        state["tracked"], state["ready"] = len(gc.get_objects()), time.perf_counter()
        return serve(server_state)

    server.serve = serve_logged
    return cli.main(argv)


def one_server(freeze: bool, n: int, concurrency: int = 16) -> None:
    import httpx

    from tests.serving.harness import engine_args, free_port
    from tests.tiny_models import tiny_model_dir

    port = free_port()
    tmp = Path(tempfile.mkdtemp(prefix="gcprobe-"))
    env = dict(os.environ, PYTHONUNBUFFERED="1", HF_HUB_OFFLINE="1", GCLOG=str(tmp / "gc.json"),
               FREEZE="1" if freeze else "0", PYTHONPATH=str(ROOT))
    log = tmp / "server.log"
    proc = subprocess.Popen([sys.executable, __file__, "--child", "serve", "--port", str(port), "--model",
                             tiny_model_dir("qwen3"), "--load-format", "dummy", *engine_args()], env=env, cwd=ROOT,
                            stdout=log.open("w"), stderr=subprocess.STDOUT)
    deadline = time.time() + 120
    while "READY" not in log.read_text():
        if proc.poll() is not None or time.time() > deadline:
            raise RuntimeError(log.read_text()[-3000:])
        time.sleep(0.2)
    url = f"http://127.0.0.1:{port}/v1/completions"

    def stream(i: int) -> int:
        body = {"model": "tiny", "prompt": f"hello {i}", "max_tokens": 16, "stream": True, "ignore_eos": True}
        with httpx.stream("POST", url, json=body, timeout=60) as r:
            return sum(1 for _ in r.iter_lines())

    t0 = time.time()
    with cf.ThreadPoolExecutor(concurrency) as ex:
        list(ex.map(stream, range(n)))
    took = time.time() - t0
    proc.send_signal(signal.SIGTERM)
    proc.wait(60)
    d = json.loads((tmp / "gc.json").read_text())
    by: dict[int, list[float]] = {}
    for gen, ms, at in d["collections"]:
        if at > d["ready"]:
            by.setdefault(gen, []).append(ms)
    summary = {g: (len(v), round(sum(v), 1), round(max(v), 1)) for g, v in sorted(by.items())}
    print(f"freeze={int(freeze)}: full collection of the start-up heap {d['full_collection_ms']:.1f} ms; {n} "
          f"streamed requests in {took:.1f} s; tracked objects at start-up {d['tracked_at_ready']}; "
          f"collections after start-up by generation (count, ms, longest ms): {summary}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        sys.exit(child(sys.argv[3:] if sys.argv[2:3] == ["serve"] else sys.argv[2:]))
    sys.path.insert(0, str(ROOT))
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1500
    for f in (False, True):
        one_server(f, count)
