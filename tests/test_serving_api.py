"""The OpenAI wire format through the official `openai` client against a live `tachyon serve`."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.serving.harness import MAX_MODEL_LEN, REAL_ENGINE, main_server
from tests.tiny_models import tiny_model_dir

MSGS = [{"role": "user", "content": "Tell me a story about a cat."}]
PROMPT = "The quick brown fox"


@pytest.fixture(scope="module")
def server():
    return main_server()


@pytest.fixture(scope="module")
def client(server):
    return server.openai(timeout=30)


def test_chat_nonstream_usage_exact(server, client):
    r = client.chat.completions.create(model="tiny", messages=MSGS, max_tokens=8, temperature=0)
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-") and r.model == "tiny"
    c = r.choices[0]
    assert c.index == 0 and c.message.role == "assistant" and c.finish_reason in ("stop", "length")
    tok = httpx.post(server.url + "/tokenize", headers=server.headers(), json={"model": "tiny", "messages": MSGS})
    assert r.usage.prompt_tokens == tok.json()["count"]
    assert 1 <= r.usage.completion_tokens <= 8
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


@pytest.mark.skipif(not REAL_ENGINE, reason="needs the real engine")
def test_prefix_cache_hits_show_in_usage_and_change_no_output(client):
    """The shared server caches prefixes: a conversation sent twice (a system prompt unique to this run) comes
    back with the same greedy answer, and the second time usage's prompt_tokens_details.cached_tokens counts the
    whole blocks it reused (none the first time); streamed usage reports it too, and so do completions."""
    import uuid

    system = "You are a terse assistant. Session " + uuid.uuid4().hex + ". " + "Answer in one line. " * 8
    msgs = [{"role": "system", "content": system}, {"role": "user", "content": "Name a colour."}]
    kw = dict(model="tiny", messages=msgs, max_tokens=8, temperature=0, extra_body={"ignore_eos": True})
    first = client.chat.completions.create(**kw)
    second = client.chat.completions.create(**kw)
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert 0 < cached < second.usage.prompt_tokens and cached >= second.usage.prompt_tokens - 16
    assert second.choices[0].message.content == first.choices[0].message.content
    chunks = list(client.chat.completions.create(**kw, stream=True, stream_options={"include_usage": True}))
    assert chunks[-1].usage.prompt_tokens_details.cached_tokens == cached
    prompt = system + " Name a colour."
    client.completions.create(model="tiny", prompt=prompt, max_tokens=2)
    again = client.completions.create(model="tiny", prompt=prompt, max_tokens=2)
    assert again.usage.prompt_tokens_details.cached_tokens > 0


@pytest.mark.skipif(not REAL_ENGINE, reason="needs the real engine")
def test_a_burst_with_one_system_prompt_computes_it_once(server, client):
    """Six chat requests with one new system prompt sent at once through the official client: whether they land
    in one engine step or several, every answer but one reuses the system prompt's blocks (cached_tokens), and
    /metrics exposes the hold-back counter."""
    import uuid
    from concurrent.futures import ThreadPoolExecutor

    system = "You answer briefly. Burst " + uuid.uuid4().hex + ". " + "Keep to the point. " * 10

    def ask(i: int):
        msgs = [{"role": "system", "content": system}, {"role": "user", "content": f"Question {i}?"}]
        return client.chat.completions.create(model="tiny", messages=msgs, max_tokens=4, temperature=0)

    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(ask, range(6)))
    cached = sorted(a.usage.prompt_tokens_details.cached_tokens for a in answers)
    assert all(c >= 64 for c in cached[1:]), cached
    assert "tachyon:prefix_cache_waits_total" in httpx.get(server.url + "/metrics", headers=server.headers()).text


def test_chat_stream_matches_nonstream_with_include_usage(client):
    kw = dict(model="tiny", messages=MSGS, max_tokens=12, temperature=0, extra_body={"ignore_eos": True})
    full = client.chat.completions.create(**kw)
    chunks = list(client.chat.completions.create(**kw, stream=True, stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(ch.object == "chat.completion.chunk" and ch.id == chunks[0].id for ch in chunks)
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == full.choices[0].message.content
    finals = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
    assert finals == ["length"]
    last = chunks[-1]
    assert last.choices == [] and last.usage.completion_tokens == 12
    assert last.usage.prompt_tokens == full.usage.prompt_tokens
    assert all(ch.usage is None for ch in chunks[:-1])


def test_completions_stream_and_nonstream(client):
    full = client.completions.create(
        model="tiny", prompt=PROMPT, max_tokens=10, temperature=0, extra_body={"ignore_eos": True}
    )
    assert full.object == "text_completion" and full.choices[0].finish_reason == "length"
    assert full.usage.completion_tokens == 10
    chunks = list(
        client.completions.create(
            model="tiny",
            prompt=PROMPT,
            max_tokens=10,
            temperature=0,
            stream=True,
            extra_body={"ignore_eos": True},
        )
    )
    assert "".join(ch.choices[0].text for ch in chunks if ch.choices) == full.choices[0].text


def test_raw_sse_framing(server):
    body = {"model": "tiny", "prompt": PROMPT, "max_tokens": 3, "stream": True}
    with httpx.stream("POST", server.url + "/v1/completions", json=body, headers=server.headers()) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        assert r.headers["x-request-id"].startswith("cmpl-")
        raw = r.read().decode()
    events = raw.split("\n\n")
    assert events[-1] == "" and events[-2] == "data: [DONE]"
    for ev in events[:-2]:
        assert ev.startswith("data: ")
        json.loads(ev[6:])


def test_n2_and_token_prompts(client):
    r = client.completions.create(
        model="tiny", prompt=[[1, 2, 3, 4], [5, 6, 7]], max_tokens=4, n=2, temperature=1.0, seed=3
    )
    assert sorted(c.index for c in r.choices) == [0, 1, 2, 3]
    assert r.usage.prompt_tokens == 7
    c = client.chat.completions.create(model="tiny", messages=MSGS, max_tokens=4, n=2, temperature=1.0)
    assert [ch.index for ch in c.choices] == [0, 1]


def test_streaming_n2_logprobs_and_echo(client):
    chunks = list(
        client.chat.completions.create(
            model="tiny",
            messages=MSGS,
            max_tokens=5,
            n=2,
            temperature=0,
            stream=True,
            logprobs=True,
            top_logprobs=2,
            extra_body={"ignore_eos": True},
        )
    )
    roles = [c.choices[0].index for c in chunks if c.choices and c.choices[0].delta.role == "assistant"]
    assert sorted(roles) == [0, 1]
    for i in (0, 1):
        mine = [c.choices[0] for c in chunks if c.choices and c.choices[0].index == i]
        assert sum(len(c.logprobs.content) for c in mine if c.logprobs) == 5
        assert [c.finish_reason for c in mine if c.finish_reason] == ["length"]
    kw = dict(
        model="tiny", prompt=PROMPT, max_tokens=4, temperature=0, echo=True, logprobs=2, extra_body={"ignore_eos": True}
    )
    full = client.completions.create(**kw).choices[0]
    parts = [c.choices[0] for c in client.completions.create(**kw, stream=True) if c.choices]
    assert "".join(p.text for p in parts) == full.text
    assert sum((p.logprobs.tokens for p in parts if p.logprobs), []) == full.logprobs.tokens
    assert sum((p.logprobs.text_offset for p in parts if p.logprobs), []) == full.logprobs.text_offset


def test_stop_string(client):
    base = (
        client.completions.create(
            model="tiny", prompt=PROMPT, max_tokens=16, temperature=0, extra_body={"ignore_eos": True}
        )
        .choices[0]
        .text
    )
    words = base.split()
    assert len(words) >= 3, base
    stop = " " + words[2]
    r = client.completions.create(
        model="tiny",
        prompt=PROMPT,
        max_tokens=16,
        temperature=0,
        stop=[stop],
        extra_body={"ignore_eos": True},
    )
    assert r.choices[0].finish_reason == "stop"
    assert r.choices[0].text == base[: base.index(stop)]


def test_seed_reproducible(client):
    kw = dict(
        model="tiny",
        prompt=PROMPT,
        max_tokens=12,
        temperature=1.0,
        seed=1234,
        extra_body={"ignore_eos": True},
    )
    a = client.completions.create(**kw).choices[0].text
    b = client.completions.create(**kw).choices[0].text
    assert a == b


def test_chat_logprobs(client):
    r = client.chat.completions.create(
        model="tiny", messages=MSGS, max_tokens=5, temperature=0, logprobs=True, top_logprobs=3
    )
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    for item in content:
        assert item.logprob <= 0 and len(item.top_logprobs) == 3 and isinstance(item.bytes, list)
    # greedy: the chosen token is the most likely one
    assert all(abs(i.logprob - i.top_logprobs[0].logprob) < 1e-4 for i in content)


def test_echo_with_prompt_logprobs(server, client):
    r = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=1, temperature=0, echo=True, logprobs=1)
    c = r.choices[0]
    assert c.text.startswith(PROMPT)
    lp = c.logprobs
    assert len(lp.tokens) == r.usage.prompt_tokens + 1
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
    assert all(x is not None and x <= 0 for x in lp.token_logprobs[1:])
    assert lp.text_offset[0] == 0 and lp.text_offset == sorted(lp.text_offset)
    # max_tokens=0 + echo scores the prompt only (lm-eval loglikelihood style)
    raw = httpx.post(
        server.url + "/v1/completions",
        headers=server.headers(),
        json={"model": "tiny", "prompt": PROMPT, "max_tokens": 0, "echo": True, "logprobs": 0},
    )
    assert raw.status_code == 200, raw.text
    body = raw.json()
    assert body["choices"][0]["text"] == PROMPT and body["usage"]["completion_tokens"] == 0
    assert len(body["choices"][0]["logprobs"]["tokens"]) == body["usage"]["prompt_tokens"]


def test_unknown_fields_ignored_and_temperature_zero_greedy(client):
    kw = dict(
        model="tiny",
        prompt=PROMPT,
        max_tokens=8,
        temperature=0,
        extra_body={"ignore_eos": True, "frobnicate": {"x": 1}, "logit_bias": None},
    )
    assert client.completions.create(**kw).choices[0].text == client.completions.create(**kw).choices[0].text


def test_models_tokenize_detokenize(server, client):
    models = client.models.list()
    assert [m.id for m in models.data] == ["tiny"]
    h = server.headers()
    ids = httpx.post(server.url + "/tokenize", headers=h, json={"model": "tiny", "prompt": PROMPT}).json()
    assert ids["count"] == len(ids["tokens"]) and ids["max_model_len"] == MAX_MODEL_LEN
    body = {"model": "tiny", "tokens": ids["tokens"]}
    text = httpx.post(server.url + "/detokenize", headers=h, json=body).json()
    assert text["prompt"] == PROMPT
    # long lists go through the thread pool: the same text as a short list's, repeated; an out-of-range id is a 400
    # naming the field wherever it sits
    long = {"model": "tiny", "tokens": ids["tokens"] * (4096 // len(ids["tokens"]) + 1)}
    r = httpx.post(server.url + "/detokenize", headers=h, json=long, timeout=30)
    assert r.status_code == 200 and r.json()["prompt"].count(PROMPT.strip()[:20]) >= 4096 // len(ids["tokens"])
    r = httpx.post(server.url + "/detokenize", headers=h, json={**long, "tokens": long["tokens"] + [10**7]})
    assert r.status_code == 400 and r.json()["error"]["param"] == "tokens"


def test_penalties_min_tokens_and_sampling_knobs(client):
    r = client.chat.completions.create(
        model="tiny",
        messages=MSGS,
        max_completion_tokens=6,
        temperature=0.7,
        top_p=0.9,
        presence_penalty=0.5,
        frequency_penalty=0.5,
        seed=7,
        user="u1",
        extra_body={"top_k": 20, "min_p": 0.05, "repetition_penalty": 1.1, "min_tokens": 6},
    )
    assert r.usage.completion_tokens == 6


@pytest.mark.skipif(not REAL_ENGINE, reason="needs the real engine")
def test_text_equals_offline_llm(server, client):
    from tachyon import LLM, SamplingParams

    llm = LLM(
        model=tiny_model_dir("llama"), device="cpu", dtype="float32", max_model_len=MAX_MODEL_LEN, num_kv_blocks=256
    )
    params = SamplingParams(temperature=0, max_tokens=16, ignore_eos=True)
    want = llm.generate([PROMPT], params, use_tqdm=False)[0].outputs[0].text
    got = (
        client.completions.create(
            model="tiny", prompt=PROMPT, max_tokens=16, temperature=0, extra_body={"ignore_eos": True}
        )
        .choices[0]
        .text
    )
    assert got == want
    # chat: the server's template + tokenisation match LLM.chat's, so the text does too
    ids = httpx.post(server.url + "/tokenize", headers=server.headers(), json={"model": "tiny", "messages": MSGS})
    want_ids = llm.generate([ids.json()["tokens"]], params, use_tqdm=False)[0].outputs[0].text
    want_chat = llm.chat(MSGS, params, use_tqdm=False)[0].outputs[0].text
    got_chat = (
        client.chat.completions.create(
            model="tiny", messages=MSGS, max_tokens=16, temperature=0, extra_body={"ignore_eos": True}
        )
        .choices[0]
        .message.content
    )
    assert got_chat == want_chat == want_ids
