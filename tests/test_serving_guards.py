"""Bad input, disconnects and /health under load, against the shared live server."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time

import httpx
import pytest

from tests.serving.harness import MAIN_KEY, assert_error_shape, main_server, wait_until

CHAT = "/v1/chat/completions"
COMP = "/v1/completions"
MSGS = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def server():
    return main_server()


def _post(server, path, *, json_body=None, content=None, headers=None, key=MAIN_KEY):
    h = {"Authorization": f"Bearer {key}"} if key else {}
    h.update(headers or {})
    if content is not None:
        h.setdefault("Content-Type", "application/json")
    t0 = time.monotonic()
    r = httpx.post(server.url + path, json=json_body, content=content, headers=h, timeout=10)
    return r, time.monotonic() - t0


BAD = [
    ("malformed json", CHAT, None, b'{"model": "tiny", "messages": [', 400),
    ("body not an object", CHAT, None, b"[1, 2, 3]", 400),
    ("empty body", CHAT, None, b"", 400),
    ("messages wrong type", CHAT, {"model": "tiny", "messages": "hi"}, None, 400),
    ("max_tokens wrong type", CHAT, {"model": "tiny", "messages": MSGS, "max_tokens": "many"}, None, 400),
    (
        "NaN temperature",
        CHAT,
        None,
        b'{"model":"tiny","messages":[{"role":"user","content":"hi"}],"temperature":NaN}',
        400,
    ),
    ("negative temperature", CHAT, {"model": "tiny", "messages": MSGS, "temperature": -1}, None, 400),
    ("max_tokens 1e9", CHAT, {"model": "tiny", "messages": MSGS, "max_tokens": 10**9}, None, 400),
    ("n 1e4", CHAT, {"model": "tiny", "messages": MSGS, "n": 10**4}, None, 400),
    (
        "top_logprobs 1e3",
        CHAT,
        {"model": "tiny", "messages": MSGS, "logprobs": True, "top_logprobs": 1000},
        None,
        400,
    ),
    ("logprobs 1e3", COMP, {"model": "tiny", "prompt": "hi", "logprobs": 1000}, None, 400),
    ("five stops", COMP, {"model": "tiny", "prompt": "hi", "stop": ["a", "b", "c", "d", "e"]}, None, 400),
    ("empty messages", CHAT, {"model": "tiny", "messages": []}, None, 400),
    ("unknown model", CHAT, {"model": "no-such-model", "messages": MSGS}, None, 404),
    ("token id out of range", COMP, {"model": "tiny", "prompt": [10**7]}, None, 400),
    ("prompt over context", COMP, {"model": "tiny", "prompt": [5] * 600}, None, 400),
    ("bad role", CHAT, {"model": "tiny", "messages": [{"role": "wizard", "content": "x"}]}, None, 400),
]
# Tool-calling forms the server does not implement, or malformed tools: refused by name, never ignored
# (params.refuse_unimplemented, tools.tool_plan).
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
UNIMPLEMENTED = [
    ("tool_choice", CHAT, {"messages": MSGS, "tools": [TOOL], "tool_choice": "sometimes"}),
    ("tool_choice", CHAT, {"messages": MSGS, "tool_choice": "required"}),  # no tools
    ("tool_choice", CHAT, {"messages": MSGS, "tools": [TOOL], "tool_choice": {"type": "function",
                                                                             "function": {"name": "g"}}}),
    ("tool_choice", CHAT, {"messages": MSGS, "tools": [TOOL], "tool_choice": "required",
                           "response_format": {"type": "json_object"}}),
    ("tools", CHAT, {"messages": MSGS, "tools": [{"type": "function"}], "tool_choice": "required"}),
    ("tools", CHAT, {"messages": MSGS, "tools": [TOOL, TOOL], "tool_choice": "required"}),
    ("functions", CHAT, {"messages": MSGS, "functions": [TOOL["function"]]}),
    ("function_call", CHAT, {"messages": MSGS, "function_call": {"name": "f"}}),
]
# Malformed output constraints (params.structured_outputs), and grammars the engine cannot compile.
BAD += [
    (f"constraint {name}", path, {"model": "tiny", **body}, None, 400)
    for name, path, body in [
        ("response_format", CHAT, {"messages": MSGS, "response_format": {"type": "xml"}}),
        ("response_format", CHAT, {"messages": MSGS, "response_format": {"type": "json_schema", "json_schema": {}}}),
        ("guided_regex", COMP, {"prompt": "hi", "guided_json": {"type": "object"}, "guided_regex": "a+"}),
        ("structured_outputs", COMP, {"prompt": "hi", "structured_outputs": {"xml": "<a/>"}}),
        ("structured_outputs", COMP, {"prompt": "hi", "structured_outputs": {"regex": "a", "choice": ["a"]}}),
        ("guided_choice", COMP, {"prompt": "hi", "guided_choice": []}),
        ("regex that does not compile", COMP, {"prompt": "hi", "guided_regex": "[a-"}),
        ("ignore_eos with a grammar", COMP, {"prompt": "hi", "guided_choice": ["a"], "ignore_eos": True}),
    ]
]
BAD += [(f"unimplemented {f}", path, {"model": "tiny", **body}, None, 400) for f, path, body in UNIMPLEMENTED]
# chat_template_kwargs carries template variables only: a request that names a templating argument is refused before
# any rendering (a swapped-in template of nested loops would otherwise hold a worker for minutes).
BOMB = "".join(f"{{% for {v} in range(3000) %}}" for v in "abc") + "x" + "{% endfor %}" * 3
BAD += [
    (f"template {key}", CHAT, {"model": "tiny", "messages": MSGS, "chat_template_kwargs": {key: value}}, None, 400)
    for key, value in [("chat_template", BOMB), ("tokenize", True), ("sanitize_control_tokens", False),
                       ("return_dict", True)]
]
BAD += [
    (f"logit_bias {name}", COMP, {"model": "tiny", "prompt": "hi", "logit_bias": bias}, None, 400)
    for name, bias in [
        ("key not an id", {"x1": 1}),
        ("key superscript digit", {"\u00b2": 1}),
        ("key 5000 digits", {"9" * 5000: 1}),
        ("id past vocab", {"10000000": 1}),
        ("value 101", {"5": 101}),
        ("value not a number", {"5": "up"}),
        ("301 entries", {str(i): 1 for i in range(301)}),
    ]
]


@pytest.mark.parametrize("name,path,body,raw,status", BAD, ids=[b[0] for b in BAD])
def test_bad_input(server, name, path, body, raw, status):
    r, dt = _post(server, path, json_body=body, content=raw)
    err = assert_error_shape(r, status)
    assert dt < 1.0, f"{name} took {dt:.2f}s"
    if status == 404:
        assert err["code"] == "model_not_found" and err["param"] == "model"
    elif "max_tokens 1e9" in name:
        assert err["code"] == "context_length_exceeded" and "512" in err["message"]
    elif name.startswith("n "):
        assert err["param"] == "n" and "16" in err["message"]
    elif name.startswith("logit_bias "):
        assert err["param"].startswith("logit_bias") and "logit_bias" in err["message"]
    elif name.startswith("constraint "):
        field = name.split(" ", 1)[1]
        if " " not in field:  # the server's own checks name the field; the engine's compile errors say what failed
            assert err["param"] == field, err
        else:
            assert "structured_outputs" in err["message"], err
    elif name.startswith("template "):
        assert err["param"] == "chat_template_kwargs" and name.split(" ", 1)[1] in err["message"], err
    elif name.startswith("unimplemented "):
        field = name.split(" ", 1)[1]
        assert err["param"] == field and field.split("_")[0] in err["message"], err


def test_invalid_json_says_where_and_why(server):
    """A body the JSON parser refuses is a 400 naming the position; nesting past its limit says so (a 300-deep
    schema is valid JSON, so "not valid JSON" alone would mislead)."""
    r, _ = _post(server, CHAT, content=b'{"model": "tiny", "messages": [')
    assert "line 1 column" in assert_error_shape(r, 400)["message"]
    deep = b'{"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "guided_json": ' + \
        b'{"items": ' * 300 + b'{}' + b'}' * 300 + b'}'
    r, _ = _post(server, CHAT, content=deep)
    err = assert_error_shape(r, 400)
    assert err["code"] == "invalid_json" and "nest at most" in err["message"], err


def test_auth(server):
    r, dt = _post(server, CHAT, json_body={"model": "tiny", "messages": MSGS}, key=None)
    assert assert_error_shape(r, 401)["type"] == "authentication_error" and dt < 1
    r, dt = _post(server, CHAT, json_body={"model": "tiny", "messages": MSGS}, key="sk-wrong")
    assert_error_shape(r, 401)
    assert httpx.get(server.url + "/health").status_code == 200  # probes and metrics stay open
    assert httpx.get(server.url + "/metrics").status_code == 200
    assert httpx.get(server.url + "/v1/models").status_code == 401


def test_20mb_body(server):
    big = b'{"model":"tiny","prompt":"' + b"a" * (20 * 1024 * 1024) + b'"}'
    r, dt = _post(server, COMP, content=big)
    assert_error_shape(r, 413)
    assert dt < 1.0

    def chunks():  # no Content-Length: counted as it arrives
        yield b'{"model":"tiny","prompt":"'
        for _ in range(20):
            yield b"a" * (1024 * 1024)
        yield b'"}'

    t0 = time.monotonic()
    r = httpx.post(server.url + COMP, content=chunks(), headers=server.headers(), timeout=10)
    assert_error_shape(r, 413)
    assert time.monotonic() - t0 < 1.0


def test_100kb_headers(server):
    r, dt = _post(server, CHAT, json_body={"model": "tiny", "messages": MSGS}, headers={"X-Junk": "a" * 100_000})
    assert_error_shape(r, 431)
    assert dt < 1.0
    # the same head arriving slowly (h11's own limit) is refused in the same shape
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Junk: ")
        try:
            for _ in range(10):
                s.sendall(b"a" * 10_000)
                time.sleep(0.01)
            s.sendall(b"\r\n\r\n")
        except OSError:  # the server answered and closed once the limit was passed
            pass
        data = s.recv(65536)
    assert data.startswith(b"HTTP/1.1 431") and b'"error"' in data


def test_slow_clients_are_cut_off(server):
    """Slow-header and slow-body clients cannot hold a connection (server runs with 2 s timeouts)."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")  # head never finished
        t0 = time.monotonic()
        data = s.recv(65536)
        assert data.startswith(b"HTTP/1.1 408") and b'"header_timeout"' in data
        assert time.monotonic() - t0 < 4
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        t0 = time.monotonic()
        assert s.recv(100) == b""  # silent connection: closed
        assert time.monotonic() - t0 < 4
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(
            (
                f"POST {COMP} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {MAIN_KEY}\r\n"
                "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
            ).encode()
        )
        data = b""
        while chunk := s.recv(65536):  # the server closes the connection after its answer
            data += chunk
        assert data.startswith(b"HTTP/1.1 408") and b'"body_timeout"' in data


def test_server_keeps_serving_after_abuse(server):
    r, _ = _post(server, COMP, json_body={"model": "tiny", "prompt": "ok", "max_tokens": 2})
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] >= 1


def _idle(server) -> bool:
    m = server.metrics()
    running = sum(v for k, v in m.items() if k.startswith("tachyon:num_requests_running"))
    free = sum(v for k, v in m.items() if k.startswith("tachyon:kv_cache_free_blocks"))
    total = sum(v for k, v in m.items() if k.startswith("tachyon:kv_cache_total_blocks"))
    return running == 0 and free == total


def _running(server) -> float:
    return server.metric("tachyon:num_requests_running")


LONG = {
    "model": "tiny",
    "prompt": "Once upon a time",
    "max_tokens": 400,
    "temperature": 0,
    "ignore_eos": True,
}


def test_disconnect_streaming_aborts(server):
    assert wait_until(lambda: _idle(server), 5)
    with httpx.Client(headers=server.headers(), timeout=10) as c:
        with c.stream("POST", server.url + COMP, json={**LONG, "stream": True}) as r:
            lines = r.iter_lines()  # held: dropping the iterator would close the response early
            for line in lines:
                if line.startswith("data: ") and json.loads(line[6:])["choices"][0]["text"]:
                    break
            assert _running(server) >= 1
    t0 = time.monotonic()
    assert wait_until(lambda: _idle(server), 1.0), server.metrics()
    assert time.monotonic() - t0 < 1.0


def test_disconnect_nonstreaming_aborts(server):
    assert wait_until(lambda: _idle(server), 5)
    body = json.dumps(LONG).encode()
    head = (
        f"POST {COMP} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {MAIN_KEY}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(head + body)
    assert wait_until(lambda: _running(server) >= 1, 5)
    s.close()
    assert wait_until(lambda: _idle(server), 1.0), server.metrics()


def test_health_p99_under_load(server):
    """200 streams running and a 5 MB body being parsed: /health still answers fast."""
    stop = threading.Event()
    lat: list[float] = []

    def probe():
        with httpx.Client(timeout=5) as c:
            while not stop.is_set():
                t0 = time.monotonic()
                assert c.get(server.url + "/health").status_code == 200
                lat.append(time.monotonic() - t0)
                time.sleep(0.02)

    async def streams():
        limits = httpx.Limits(max_connections=300)
        async with httpx.AsyncClient(headers=server.headers(), timeout=60, limits=limits) as c:

            async def one(i):
                body = {"model": "tiny", "prompt": f"story {i}", "max_tokens": 12, "stream": True, "ignore_eos": True}
                async with c.stream("POST", server.url + COMP, json=body) as r:
                    assert r.status_code == 200
                    last = [x async for x in r.aiter_lines() if x][-1]
                return last, time.monotonic()

            async def big():
                await asyncio.sleep(0.3)
                payload = b'{"model":"tiny","prompt":"' + b"word " * (1024 * 1024) + b'"}'
                r = await c.post(server.url + COMP, content=payload, headers={"Content-Type": "application/json"})
                return r.status_code, time.monotonic()

            return await asyncio.gather(*(one(i) for i in range(200)), big())

    t = threading.Thread(target=probe)
    t.start()
    try:
        results = asyncio.run(streams())
    finally:
        stop.set()
        t.join()
    big_status, big_done = results[-1]
    assert big_status == 400  # the 5 MB prompt cannot fit the context: a clean 400
    assert all(last == "data: [DONE]" for last, _ in results[:-1])
    assert big_done < max(done for _, done in results[:-1])  # parsed while the streams were running
    lat.sort()
    p99 = lat[int(len(lat) * 0.99) - 1] if len(lat) > 1 else lat[0]
    print(f"health probes={len(lat)} p99={p99:.3f}s max={lat[-1]:.3f}s")
    assert len(lat) >= 10 and p99 < 1.0, (len(lat), p99, lat[-5:])


def test_metrics_names(server):
    text = httpx.get(server.url + "/metrics").text
    for name in (
        "tachyon:num_requests_running",
        "tachyon:num_requests_waiting",
        "tachyon:kv_cache_usage_perc",
        "tachyon:num_preemptions_total",
        "tachyon:prompt_tokens_total",
        "tachyon:generation_tokens_total",
        "tachyon:time_to_first_token_seconds_bucket",
        "tachyon:inter_token_latency_seconds_bucket",
        "tachyon:time_per_output_token_seconds_bucket",
        "tachyon:e2e_request_latency_seconds_bucket",
        "tachyon:request_queue_time_seconds_bucket",
        'tachyon:request_success_total{finished_reason="length"',
    ):
        assert name in text, name
    m = server.metrics()
    assert m['tachyon:request_success_total{finished_reason="length",model_name="tiny"}'] >= 1
    assert m['tachyon:generation_tokens_total{model_name="tiny"}'] >= 1
