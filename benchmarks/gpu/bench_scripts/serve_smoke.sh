# One H200 call: `tachyon serve` (Qwen2.5-7B dummy shape, prefill graphs on) under concurrent requests that
# take every sampling path (greedy, top-p, logprobs, penalties, n=2, streaming) plus one invalid request,
# then a short closed-loop concurrency sweep. Needs .tok (the SmolLM2 tokenizer directory) carried with .whl.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/serve_smoke.sh
. benchmarks/gpu/bench_scripts/env.sh
python3 -m tachyon.serving --model qwen2.5-7b --load-format dummy --tokenizer .tok \
  --served-model-name m --port 8000 > /tmp/res/server.log 2>&1 &
SPID=$!
python3 - <<'PY'
import asyncio, json, time, httpx
for _ in range(150):
    try:
        if httpx.get("http://127.0.0.1:8000/health", timeout=2).status_code == 200:
            break
    except Exception:
        pass
    time.sleep(2)
U = "http://127.0.0.1:8000/v1/chat/completions"
def body(i):
    b = {"model": "m", "messages": [{"role": "user", "content": f"request {i}: " + "tell me a story " * (i % 7 + 1)}],
         "max_tokens": 24}
    kind = i % 6
    if kind == 1: b.update(temperature=0.7, top_p=0.9, seed=i)
    if kind == 2: b.update(logprobs=True, top_logprobs=3, temperature=0)
    if kind == 3: b.update(presence_penalty=0.5, frequency_penalty=0.3, temperature=0.8)
    if kind == 4: b.update(n=2, temperature=1.0)
    if kind == 5: b.update(stream=True, temperature=0)
    return b
async def one(c, i):
    b = body(i)
    if b.get("stream"):
        chunks = 0
        async with c.stream("POST", U, json=b) as r:
            async for line in r.aiter_lines():
                chunks += line.startswith("data:") and line != "data: [DONE]"
        return i, r.status_code, chunks
    r = await c.post(U, json=b)
    d = r.json()
    ok = r.status_code == 200 and all(ch["message"]["content"] is not None for ch in d["choices"])
    if b.get("logprobs"):
        ok &= len(d["choices"][0]["logprobs"]["content"]) == d["usage"]["completion_tokens"]
    return i, r.status_code if ok else -r.status_code, d["usage"]["completion_tokens"]
async def main():
    async with httpx.AsyncClient(timeout=120) as c:
        t0 = time.perf_counter()
        res = await asyncio.gather(*(one(c, i) for i in range(48)))
        bad = await c.post(U, json={"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": -3})
        print(json.dumps(dict(seconds=round(time.perf_counter() - t0, 2), statuses=sorted({s for _, s, _ in res}),
                              tokens=sum(t for *_, t in res), invalid_request_status=bad.status_code,
                              invalid_request_error=bad.json().get("error", {}).get("message", "")[:120])))
asyncio.run(main())
PY
timeout 150 $B bench serve --base-url http://127.0.0.1:8000 --model m --dataset random --input-len 256 \
  --output-len 128 --vocab-size 49152 --num-prompts 64 --sweep --sweep-mode concurrency --sweep-values 1,32 \
  --output /tmp/res/serve_smoke.json --report-dir /tmp/res --no-progress 2>&1 | grep -v "^$" | tail -8
kill $SPID; sleep 2
grep -v tachyon.serving.access /tmp/res/server.log | grep -i "error\|traceback\|ready" | tail -5
cp /tmp/res/serve_smoke.json /tmp/res/serve_smoke.md $OUT/ 2>/dev/null
