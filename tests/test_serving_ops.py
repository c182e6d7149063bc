"""Operations: overload, per-key rate limits, secrets kept out of logs, several models, SIGTERM drain."""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import time
from pathlib import Path

import httpx
import pytest

from tests.serving.harness import Server, assert_error_shape, engine_args, scratch_file
from tests.tiny_models import tiny_model_dir

MARKER = "ZQXJ-marker-prompt-7f3a"
MARKER_KEY = "sk-MARKERKEY-9b1c55"
RL_KEY = "sk-ratelimit-key"
OTHER_KEY = "sk-other-key"
BURST_KEYS = [f"sk-burst-{i}" for i in range(30)]
QUEUE = 3  # --max-queue N; the burst is 10 * N


def _key_file(keys: list[str]) -> str:
    lines = ["# sha256 of each accepted key\n"] + [hashlib.sha256(k.encode()).hexdigest() + "\n" for k in keys]
    return str(scratch_file("keys-", ".txt", "".join(lines)))


@pytest.fixture(scope="module")
def guard_server():
    keys = _key_file([MARKER_KEY, RL_KEY, OTHER_KEY, *BURST_KEYS])
    s = Server(
        [
            "--model",
            tiny_model_dir("llama"),
            "--served-model-name",
            "tiny",
            "--api-key-file",
            keys,
            "--max-queue",
            str(QUEUE),
            "--rate-limit",
            "5/minute",
            "--log-level",
            "debug",
            *engine_args(max_num_seqs=2),
        ]
    )
    yield s
    s.stop()


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def test_overload_bounded_queue(guard_server):
    s = guard_server
    rss0 = _rss_kb(s.proc.pid)
    body = {"model": "tiny", "prompt": "count with me", "max_tokens": 32, "ignore_eos": True, "temperature": 0}

    async def burst():
        async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=64)) as c:
            return await asyncio.gather(
                *(
                    c.post(s.url + "/v1/completions", json=body, headers={"Authorization": f"Bearer {k}"})
                    for k in BURST_KEYS
                )
            )

    responses = asyncio.run(burst())
    codes = [r.status_code for r in responses]
    assert set(codes) <= {200, 429}, codes
    ok = [r for r in responses if r.status_code == 200]
    assert 2 + QUEUE <= len(ok) < len(codes), codes
    for r in ok:  # every admitted request completes
        assert r.json()["usage"]["completion_tokens"] == 32
    for r in responses:
        if r.status_code == 429:
            assert int(r.headers["retry-after"]) >= 1
            assert assert_error_shape(r, 429)["code"] == "server_overloaded"
    assert _rss_kb(s.proc.pid) - rss0 < 200_000  # KiB
    assert s.metric("tachyon:num_requests_running") == 0


def test_rate_limit_per_key(guard_server):
    s = guard_server
    body = {"model": "tiny", "prompt": "hi", "max_tokens": 1}
    with httpx.Client(timeout=30, headers={"Authorization": f"Bearer {RL_KEY}"}) as c:
        responses = [c.post(s.url + "/v1/completions", json=body) for _ in range(5 + 10)]
    codes = [r.status_code for r in responses]
    assert codes.count(200) == 5 and codes.count(429) == 10, codes
    for r in responses[5:]:
        assert assert_error_shape(r, 429)["code"] == "rate_limit_exceeded"
        assert 1 <= int(r.headers["retry-after"]) <= 60
    other = httpx.post(s.url + "/v1/completions", json=body, headers={"Authorization": f"Bearer {OTHER_KEY}"})
    assert other.status_code == 200  # limits are per key


def test_marker_never_logged(guard_server):
    s = guard_server
    h = {"Authorization": f"Bearer {MARKER_KEY}"}
    bodies = []
    with httpx.Client(timeout=30, base_url=s.url) as c:
        r = c.post(
            "/v1/chat/completions",
            headers=h,
            json={"model": "tiny", "messages": [{"role": "user", "content": f"say {MARKER}"}], "max_tokens": 4},
        )
        assert r.status_code == 200
        with c.stream(
            "POST",
            "/v1/completions",
            headers=h,
            json={"model": "tiny", "prompt": MARKER, "max_tokens": 4, "stream": True},
        ) as st:
            bodies.append(st.read().decode())
        bad = c.post(
            "/v1/chat/completions",
            headers=h,
            json={"model": "tiny", "messages": [{"role": "user", "content": {"text": MARKER}}]},
        )
        assert bad.status_code == 400
        long = c.post("/v1/completions", headers=h, json={"model": "tiny", "prompt": MARKER * 400})
        assert long.status_code == 400
        wrong = c.post(
            "/v1/completions",
            headers={"Authorization": f"Bearer {MARKER_KEY}x"},
            json={"model": "tiny", "prompt": MARKER},
        )
        assert wrong.status_code == 401
        bodies += [bad.text, long.text, wrong.text]
        metrics = c.get("/metrics").text
    time.sleep(0.2)
    log = s.log()
    assert '"level": "debug"' in log  # DEBUG really was on
    assert '"route": "chat"' in log and '"key_id": "key-' in log  # and access lines were written
    for where, text in [("log", log), ("metrics", metrics), *((f"body{i}", b) for i, b in enumerate(bodies))]:
        assert MARKER not in text, where
        assert MARKER_KEY not in text, where
        assert "MARKERKEY" not in text, where


@pytest.fixture(scope="module")
def ops_server():
    cfg = str(scratch_file("models-", ".yaml", f"""models:
  - name: alpha
    model: {tiny_model_dir("llama")}
    dtype: float32
    max_model_len: 512
    memory_share: 0.4
    num_kv_blocks: 1024
  - names: [beta, beta-alias]
    model: {tiny_model_dir("qwen2")}
    dtype: float32
    max_model_len: 256
    memory_share: 0.4
    num_kv_blocks: 1024
"""))
    s = Server(["--config", cfg, "--device", "cpu", "--drain-timeout", "30", "--api-key", "sk-ops"], "sk-ops")
    yield s
    s.stop()


def test_two_model_config(ops_server):
    s = ops_server
    with s.client() as c:
        ids = [m["id"] for m in c.get("/v1/models").json()["data"]]
        assert ids == ["alpha", "beta", "beta-alias"]
        for name in ("alpha", "beta", "beta-alias"):
            r = c.post("/v1/completions", json={"model": name, "prompt": "hello", "max_tokens": 3})
            assert r.status_code == 200 and r.json()["model"] == name, r.text
        tok = c.post("/tokenize", json={"model": "beta", "prompt": "hi"}).json()
        assert tok["max_model_len"] == 256
        assert_error_shape(c.post("/v1/completions", json={"model": "gamma", "prompt": "x"}), 404)
    text = httpx.get(s.url + "/metrics").text
    assert 'model_name="alpha"' in text and 'model_name="beta"' in text
    # the CPU engines arm no Triton watch: their late-compile counters read zero
    assert 'tachyon:late_kernel_compiles_total{model_name="alpha"} 0.0' in text


def test_sigterm_drains_open_streams(ops_server):
    s = ops_server
    h = s.headers()
    body = {"model": "alpha", "prompt": "a long story", "max_tokens": 64, "ignore_eos": True, "stream": True}

    async def run():
        started = [asyncio.Event() for _ in range(20)]
        async with httpx.AsyncClient(timeout=60, headers=h) as c:

            async def stream(i):
                lines = []
                async with c.stream("POST", s.url + "/v1/completions", json=body) as r:
                    assert r.status_code == 200
                    async for line in r.aiter_lines():
                        if line:
                            lines.append(line)
                            started[i].set()
                return lines

            tasks = [asyncio.create_task(stream(i)) for i in range(20)]
            await asyncio.wait_for(asyncio.gather(*(e.wait() for e in started)), 30)
            assert not any(t.done() for t in tasks), "streams ended before SIGTERM; make them longer"
            os.kill(s.proc.pid, signal.SIGTERM)
            t0 = time.monotonic()
            ready = await c.get(s.url + "/health/ready")
            ready_dt = time.monotonic() - t0
            fresh = await c.post(s.url + "/v1/completions", json={"model": "alpha", "prompt": "x", "max_tokens": 1})
            return ready, ready_dt, fresh, await asyncio.gather(*tasks)

    ready, ready_dt, fresh, streams = asyncio.run(run())
    assert ready.status_code == 503 and ready_dt < 1.0
    assert_error_shape(fresh, 503)
    assert "retry-after" in fresh.headers
    for lines in streams:
        assert lines[-1] == "data: [DONE]"
        assert '"finish_reason":"length"' in lines[-2]
    assert s.proc.wait(30) == 0
