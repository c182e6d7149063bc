"""`bench serve` against a live `tachyon serve` on 127.0.0.1: a short Poisson search for the max rate
sustainable under a lax SLO. Skipped when the serving layer or the engine is not importable."""

import json
import os
import socket
import subprocess
import sys
import time

import httpx
import pytest

from tests.test_bench_serve import run_cli


def _importable() -> bool:
    try:
        import tachyon.engine.llm  # noqa: F401
        import tachyon.serving.cli  # noqa: F401
    except ImportError:
        return False
    return True


pytestmark = pytest.mark.skipif(not _importable(), reason="tachyon.serving / tachyon.engine not importable")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def live_server(tiny_llama, tmp_path_factory):
    port = _free_port()
    log = tmp_path_factory.mktemp("live") / "server.log"
    cmd = [sys.executable, "-m", "tachyon.serving", "--model", tiny_llama, "--served-model-name", "tiny",
           "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32", "--device", "cpu",
           "--max-model-len", "256", "--num-kv-blocks", "64"]
    env = dict(os.environ)
    env.pop("TACHYON_API_KEY", None)  # no auth on this loopback server
    with log.open("w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 90
        while True:
            if proc.poll() is not None:
                pytest.fail(f"tachyon serve exited {proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                if httpx.get(f"{url}/health", timeout=2, trust_env=False).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.time() > deadline:
                pytest.fail(f"tachyon serve did not become healthy:\n{log.read_text()[-3000:]}")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_poisson_search_finds_max_sustainable_rate(live_server, tmp_path):
    out = tmp_path / "live.json"
    rc = run_cli(["bench", "serve", "--base-url", live_server, "--model", "tiny", "--num-prompts", "8",
                  "--input-len", "16", "--output-len", "8", "--vocab-size", "49152", "--process", "poisson",
                  "--find-max-rate", "--start-rate", "4", "--max-probes", "4", "--rate-tol", "0.5",
                  "--probe-duration", "0",
                  "--slo-ttft-ms", "5000", "--slo-tpot-ms", "1000", "--slo-max-error-rate", "0",
                  "--capacity", "20", "--output", str(out), "--no-progress"])
    assert rc == 0
    data = json.loads(out.read_text())
    rate = data["analysis"]["max_sustainable_rate"]
    assert rate >= 4 and data["analysis"]["replicas"] >= 1
    passing = [r for r in data["runs"] if r["summary"]["slo_pass"]]
    assert passing and all(r["summary"]["output_tokens"] == 64 and r["summary"]["num_failed"] == 0
                           for r in passing)
    assert all(r["summary"]["input_tokens"] == 8 * 16 for r in passing)  # server saw exact prompt lengths
