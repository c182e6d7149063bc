"""Live `tachyon serve` processes on 127.0.0.1 for the serving tests, plus small HTTP helpers.

Servers run as subprocesses (the real CLI, the real engine with a tiny random model on CPU) and
are shared: `shared_server(name, ...)` starts one per name per test session.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from tests.tiny_models import tiny_model_dir

ROOT = Path(__file__).resolve().parents[2]


# The acceptance tests run the real engine. TACHYON_TEST_FAKE_ENGINE=1 swaps in the stand-in of
# tests/serving/fake_engine.py (same API) to work on the server while the engine is broken.
REAL_ENGINE = os.environ.get("TACHYON_TEST_FAKE_ENGINE") != "1"
FAKE = "tests.serving.fake_engine:FakeAsyncEngine"
MAX_MODEL_LEN = 512

# this process's server logs, key files and configs; removed at exit (after the servers stop: atexit is LIFO)
SCRATCH = Path(tempfile.mkdtemp(prefix="tachyon-test-"))
atexit.register(shutil.rmtree, SCRATCH, ignore_errors=True)


def scratch_file(prefix: str, suffix: str, text: str = "") -> Path:
    """A new file holding `text` under SCRATCH (gone when the test process exits)."""
    fd, path = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=SCRATCH)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return Path(path)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def engine_args(max_num_seqs: int = 256, blocks: int = 2048) -> list[str]:
    return [
        "--device",
        "cpu",
        "--dtype",
        "float32",
        "--max-model-len",
        str(MAX_MODEL_LEN),
        "--num-kv-blocks",
        str(blocks),
        "--max-num-seqs",
        str(max_num_seqs),
    ]


class Server:
    """One `tachyon serve` subprocess; output goes to `log_path`."""

    def __init__(self, args: list[str], api_key: str | None = None, startup_timeout: float = 120.0) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.api_key = api_key
        self.log_path = scratch_file("serve-", ".log")
        env = dict(os.environ, PYTHONUNBUFFERED="1", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
        if not REAL_ENGINE:
            env["TACHYON_ENGINE_CLASS"] = FAKE
        cmd = [sys.executable, "-m", "tachyon.serving", "serve", "--port", str(self.port), *args]
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + startup_timeout
        while "READY http://" not in self.log():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"server did not start:\n{self.log()[-4000:]}")
            time.sleep(0.1)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def headers(self, key: str | None = None) -> dict[str, str]:
        k = key or self.api_key
        return {"Authorization": f"Bearer {k}"} if k else {}

    def client(self, timeout: float = 30.0) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=self.headers(), timeout=timeout)

    def openai(self, **kw):
        import openai

        return openai.OpenAI(base_url=self.url + "/v1", api_key=self.api_key or "none", max_retries=0, **kw)

    def metrics(self) -> dict[str, float]:
        """Sample values keyed by sample name with labels, e.g. `tachyon:num_requests_running{...}`."""
        text = httpx.get(self.url + "/metrics", timeout=5).text
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                out[name] = float(value)
        return out

    def metric(self, prefix: str) -> float:
        """Sum of all samples whose name starts with `prefix` (all models, all labels)."""
        return sum(v for k, v in self.metrics().items() if re.match(re.escape(prefix) + r"($|\{)", k))

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode


_SERVERS: dict[str, Server] = {}


def shared_server(name: str, args: list[str], api_key: str | None = None) -> Server:
    if name not in _SERVERS:
        _SERVERS[name] = Server(args, api_key)
    return _SERVERS[name]


@atexit.register
def _stop_all() -> None:
    for s in _SERVERS.values():
        s.stop()


MAIN_KEY = "sk-main-test-key"


def main_server() -> Server:
    """The server most tests share: one tiny llama, one API key, default guards but 2 s head/body timeouts, the
    hermes tool-call parser (tool_choice "auto"), prefix caching on (every test through it then checks that cached
    prefixes change nothing a client sees but usage's cached_tokens)."""
    return shared_server(
        "main",
        [
            "--model",
            tiny_model_dir("llama"),
            "--served-model-name",
            "tiny",
            "--api-key",
            MAIN_KEY,
            "--header-timeout",
            "2",
            "--body-timeout",
            "2",
            "--tool-call-parser",
            "hermes",
            "--enable-prefix-caching",
            *engine_args(),
        ],
        MAIN_KEY,
    )


def wait_until(pred, timeout: float, interval: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(interval)
    return pred()


def assert_error_shape(resp: httpx.Response, status: int) -> dict:
    assert resp.status_code == status, (resp.status_code, resp.text[:300])
    body = resp.json()
    err = body["error"]
    assert set(err) == {"message", "type", "param", "code"}, body
    assert isinstance(err["message"], str) and err["message"]
    return err
