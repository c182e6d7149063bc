"""Random request bodies against the live server: every answer is a 2xx or a well-formed 4xx, never a 5xx or a
hang; streams end with [DONE]; the server logs no traceback; and afterwards it is idle with every KV block free
(no request leaked) and still serves.

The bodies start from a valid chat, completions, tokenize or detokenize request and change 1-4 fields to values
drawn from pools of wrong types, edge numbers, odd strings and odd structures, or from each field's own edges
(EDGES: in range, just out of it, and the two values that used to fail a whole batch). Seeded: a failure names its
case and reproduces.
"""

from __future__ import annotations

import json
import random
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.serving.harness import main_server, wait_until

CHAT = "/v1/chat/completions"
COMP = "/v1/completions"
CASES = 600

INTS = [-(2**63), -1, 0, 1, 2, 3, 16, 17, 511, 512, 513, 2**31, 2**63, 10**30]
FLOATS = [-1e308, -2.0, -0.0, 1e-300, 0.5, 1.0, 2.0, 100.0, 1e308]
STRINGS = ["", " ", "a", "\x00", "\ud7ff", "🙂" * 40, "<|im_start|>", "</s>", "{", "x" * 5000, "1", "null",
           "\\u0000", "%s%n", "../../etc/passwd"]
LISTS = [[], [None], [1, "a"], [[]], [[1, 2], []], [{}], ["a"] * 5, list(range(40)), [[[[[]]]]], [-1], [2**40]]
DICTS = [{}, {"a": 1}, {"type": None}, {"type": "text"}, {"type": "json_object"}, {"type": "json_schema"},
         {"type": "json_schema", "json_schema": {"name": "x", "schema": 5}},
         {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "properties": {"a": 1}}}},
         {"type": "json_schema", "json_schema": {"name": "x", "schema": {"$ref": "#/nowhere"}}},
         {"type": "function", "function": {"name": 5}}, {"1": 1e308}, {"5": -100}, {"x": {"y": {"z": []}}}]
SCHEMAS = [{"type": "object"}, {"type": "array", "items": {"type": "integer"}, "minItems": 1000},
           {"type": "string", "pattern": "[a-"}, {"enum": []}, {"type": "nope"}, {"anyOf": []}, {"$ref": "#"},
           {"type": "integer", "minimum": 5, "maximum": 1}]
POOLS = [INTS, FLOATS, STRINGS, LISTS, DICTS, [None, True, False]]
# values inside (or just outside) each field's range: they get past validation and reach the engine's edges
EDGES = {
    "max_tokens": [1, 2, 16, 0], "max_completion_tokens": [1, 5], "temperature": [0, 1e-30, 0.01, 2.0, 100.0],
    "top_p": [1e-30, 0.01, 1.0, 0.0], "top_k": [-1, 0, 1, 1000, 2**31 - 1, 2**63], "min_p": [0.0, 1e-30, 0.99, 1.0],
    "n": [1, 2, 16, 17], "presence_penalty": [-2.0, 2.0], "frequency_penalty": [-2.0, 2.0],
    "repetition_penalty": [0.01, 100.0, 1e-300, 0.5, 1e300], "min_tokens": [0, 1, 3, 600], "seed": [0, -1, 2**63],
    "logprobs": [0, 1, 5, 20, 21, True], "top_logprobs": [0, 20], "stop": ["\n", ["a", "e"], ["\n"] * 4],
    "stop_token_ids": [[0], [1, 2], [49151]], "logit_bias": [{"5": 100}, {"0": -100}, {"49151": 5.5}],
    "ignore_eos": [True], "echo": [True], "best_of": [1, 2], "stream": [True],
    "stream_options": [{"include_usage": True}, {"include_usage": True, "continuous_usage_stats": True}],
    "add_generation_prompt": [False], "continue_final_message": [True],
}

SAMPLING = ["max_tokens", "temperature", "top_p", "top_k", "min_p", "n", "stop", "stop_token_ids", "seed",
            "presence_penalty", "frequency_penalty", "repetition_penalty", "ignore_eos", "min_tokens",
            "include_stop_str_in_output", "skip_special_tokens", "user", "stream", "stream_options", "logit_bias",
            "response_format", "guided_json", "guided_regex", "guided_choice", "guided_grammar", "structured_outputs",
            "model"]
CHAT_ONLY = ["messages", "max_completion_tokens", "logprobs", "top_logprobs", "add_generation_prompt",
             "continue_final_message", "chat_template_kwargs", "tools", "tool_choice", "parallel_tool_calls",
             "functions", "function_call"]
COMP_ONLY = ["prompt", "logprobs", "echo", "suffix", "best_of"]


def _message(rng: random.Random):
    """A chat message, mostly well-formed with one odd part."""
    msg = {"role": rng.choice(["user", "assistant", "system", "tool", "developer", "wizard", None, 5]),
           "content": rng.choice(["hi", "", None, 5, [], [{"type": "text", "text": "hi"}], [{"type": "image_url"}],
                                  [{"type": "text", "text": None}], [{"text": "x"}], "x" * 3000])}
    if rng.random() < 0.3:
        msg["tool_calls"] = rng.choice([[], [{}], [{"id": "c", "type": "function",
                                                   "function": {"name": "f", "arguments": "{not json"}}],
                                        [{"function": {"name": "f", "arguments": {"x": 1}}}], "calls"])
    if rng.random() < 0.2:
        msg["tool_call_id"] = rng.choice(["c", 5, None])
    return msg


def _value(rng: random.Random, field: str):
    """A value for `field`: sometimes shaped for the field (to get past type checks), else from any pool."""
    r = rng.random()
    if field in EDGES and r < 0.5:
        return rng.choice(EDGES[field])
    if field == "messages" and r < 0.7:
        return [_message(rng) for _ in range(rng.randint(0, 3))]
    if field == "prompt" and r < 0.7:
        return rng.choice(["", "hi", [], [[]], [""], ["a", "b"], [1, 2, 3], [[1, 2], [3]], [0] * 600, [-1],
                           [2**31], "x" * 20000, [[1], []]])
    if field in ("guided_json", "response_format", "structured_outputs") and r < 0.5:
        schema = rng.choice(SCHEMAS)
        return {"guided_json": schema, "structured_outputs": {"json": schema},
                "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}}[field]
    if field in ("guided_regex", "guided_grammar") and r < 0.5:
        return rng.choice(["a+", "(a|", "[\\d]{1000000}", "root ::= \"a\"", "root ::= root", ".*", ""])
    if field == "guided_choice" and r < 0.5:
        return rng.choice([["a", "b"], [""], ["a"] * 100, [5], "a"])
    if field == "tools" and r < 0.5:
        return rng.choice([[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
                           [{"type": "function", "function": {"name": "f", "parameters": rng.choice(SCHEMAS)}}],
                           [{"type": "function"}], [{}]])
    if field == "stop" and r < 0.5:
        return rng.choice([["", "a"], [""], "", ["x" * 5000], ["a", "b", "c", "d"]])
    return rng.choice(rng.choice(POOLS))


def _body(rng: random.Random) -> tuple[str, dict]:
    r = rng.random()
    if r < 0.1:  # the tokenizer routes: a prompt or messages in, token ids out and back
        body = {"model": "tiny", "prompt": "hi"} if r < 0.05 else {"model": "tiny", "tokens": [5, 6]}
        for field in rng.sample(["prompt", "messages", "add_special_tokens", "add_generation_prompt", "tokens"],
                                rng.randint(1, 2)):
            odd_ids = [[], [0], [49151], [49152], [-1], [2**63], list(range(3000))]
            body[field] = rng.choice(odd_ids) if field == "tokens" and rng.random() < 0.5 else _value(rng, field)
        return ("/tokenize" if "prompt" in body or "messages" in body else "/detokenize"), body
    chat = rng.random() < 0.55
    body: dict = {"model": "tiny", "max_tokens": 3, "temperature": rng.choice([0, 0.8])}
    if chat:
        body["messages"] = [{"role": "user", "content": "hi"}]
    else:
        body["prompt"] = "Once upon a time"
    fields = SAMPLING + (CHAT_ONLY if chat else COMP_ONLY)
    for field in rng.sample(fields, rng.randint(1, 4)):
        body[field] = _value(rng, field)
    return (CHAT if chat else COMP), body


def _check_stream(text: str, case: int) -> None:
    events = [line[6:] for line in text.splitlines() if line.startswith("data: ")]
    assert events and events[-1] == "[DONE]", (case, text[-500:])
    for event in events[:-1]:
        err = json.loads(event).get("error")
        if err is not None:
            assert set(err) >= {"message", "type", "code"} and err["code"] != "engine_error", (case, err)


@pytest.fixture(scope="module")
def server():
    return main_server()


def _send(client: httpx.Client, case: int, path: str, body: dict) -> int:
    """One fuzz case; asserts its answer's shape and returns its status."""
    r = client.post(path, content=json.dumps(body, allow_nan=True).encode(),
                    headers={"Content-Type": "application/json"})
    assert r.status_code < 500, (case, body, r.status_code, r.text[:500])
    if r.status_code >= 400:
        err = r.json()["error"]
        assert set(err) == {"message", "type", "param", "code"} and err["message"], (case, body, err)
    elif body.get("stream") is True:
        _check_stream(r.text, case)
    elif path in ("/tokenize", "/detokenize"):
        assert ("tokens" if path == "/tokenize" else "prompt") in r.json(), (case, body, r.text[:300])
    else:
        assert r.json()["choices"], (case, body, r.text[:300])
    return r.status_code


def test_random_bodies_never_crash_hang_or_leak(server):
    """Four clients send the cases concurrently (a bad row shares its batch with others) while a fifth sends valid
    requests that must all succeed: a case that poisoned a step would fail the canaries beside it."""
    rng = random.Random(20261204)
    cases = [(i, *_body(rng)) for i in range(CASES)]
    log_start = server.log_path.stat().st_size
    done = threading.Event()
    canaries: list[int] = []

    def canary() -> None:
        with httpx.Client(base_url=server.url, headers=server.headers(), timeout=60) as client:
            while not done.is_set():
                r = client.post(COMP, json={"model": "tiny", "prompt": "Once upon a time", "max_tokens": 4,
                                            "ignore_eos": True, "temperature": 0.7})
                assert r.status_code == 200, r.text[:300]
                assert r.json()["usage"]["completion_tokens"] == 4
                canaries.append(r.status_code)

    def worker(part: list) -> list[int]:
        with httpx.Client(base_url=server.url, headers=server.headers(), timeout=60) as client:
            return [_send(client, *case) for case in part]

    with ThreadPoolExecutor(5) as pool:
        watch = pool.submit(canary)
        try:
            statuses = [s for f in [pool.submit(worker, cases[k::4]) for k in range(4)] for s in f.result()]
        finally:
            done.set()
        watch.result()
    assert len(canaries) >= 5, canaries
    ok = sum(s == 200 for s in statuses)
    assert ok >= CASES // 10 and sum(s >= 400 for s in statuses) >= CASES // 3, \
        statuses  # the pools reach both the engine and the validators
    assert wait_until(lambda: _idle(server), 10), server.metrics()
    r = httpx.post(server.url + COMP, headers=server.headers(), timeout=30,
                   json={"model": "tiny", "prompt": "ok", "max_tokens": 2})
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] >= 1
    with open(server.log_path, "rb") as f:
        f.seek(log_start)
        log = f.read().decode(errors="replace")
    assert "Traceback" not in log and "engine request failed" not in log, log[-3000:]


def _idle(server) -> bool:
    running = server.metric("tachyon:num_requests_running")
    waiting = server.metric("tachyon:num_requests_waiting")
    return running == 0 and waiting == 0 and \
        server.metric("tachyon:kv_cache_free_blocks") == server.metric("tachyon:kv_cache_total_blocks")
