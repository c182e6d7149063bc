"""A tiny OpenAI-compatible `/v1/completions` SSE server with a simulated engine, for testing the client.

The simulated engine runs at most `max_batch` requests at once (others wait: queueing shows in
TTFT); each step emits `tokens_per_chunk` tokens per running request after
`tpot_s * max(1, running / max_batch * slowdown)` seconds; `chunk_usage=False` sends usage only at
the end (as servers without continuous usage stats do). Contract: `FakeServer(...).start()` binds
127.0.0.1 on a free port in a background thread and returns the base URL; `.stop()` shuts it down.
Requests for model "broken" get HTTP 500. Stdlib asyncio only (HTTP/1.1, one request per connection).
"""

from __future__ import annotations

import asyncio
import json
import threading


class FakeServer:
    def __init__(self, ttft_s: float = 0.02, tpot_s: float = 0.01, max_batch: int = 8,
                 tokens_per_chunk: int = 1, slowdown: float = 1.0, chunk_usage: bool = True) -> None:
        self.ttft_s, self.tpot_s, self.max_batch = ttft_s, tpot_s, max_batch
        self.tokens_per_chunk, self.slowdown, self.chunk_usage = tokens_per_chunk, slowdown, chunk_usage
        self.running = 0
        self.requests_seen = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self.port = 0

    def start(self) -> str:
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("fake server did not start")
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._stop_event.set)
        if self._thread is not None:
            self._thread.join(5)

    def _serve(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._loop.run_until_complete(self._main())

    async def _main(self) -> None:
        self._stop_event = asyncio.Event()
        self._slots = asyncio.Semaphore(self.max_batch)
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            await self._stop_event.wait()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode().split("\r\n")
            method, path = lines[0].split(" ")[:2]
            length = 0
            for ln in lines[1:]:
                if ln.lower().startswith("content-length:"):
                    length = int(ln.split(":", 1)[1])
            body = json.loads(await reader.readexactly(length)) if length else {}
            if method != "POST" or not path.endswith("/completions"):
                await self._send(writer, 404, {"error": {"message": "not found"}})
                return
            self.requests_seen += 1
            if body.get("model") == "broken":  # lets tests exercise failed requests
                await self._send(writer, 500, {"error": {"message": "simulated failure"}})
                return
            await self._complete(writer, body)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _send(self, writer: asyncio.StreamWriter, status: int, obj: dict) -> None:
        data = json.dumps(obj).encode()
        writer.write(f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {len(data)}"
                     f"\r\nConnection: close\r\n\r\n".encode() + data)
        await writer.drain()

    async def _complete(self, writer: asyncio.StreamWriter, body: dict) -> None:
        prompt = body.get("prompt", "")
        n_prompt = len(prompt) if isinstance(prompt, list) else max(1, len(str(prompt)) // 4)
        n_out = int(body.get("max_tokens") or 16)
        stream = bool(body.get("stream"))
        if stream:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
            await writer.drain()
        async with self._slots:
            self.running += 1
            try:
                loop = asyncio.get_running_loop()
                deadline = loop.time() + self.ttft_s  # absolute deadlines: sleep overshoot does not add up
                done = 0
                while done < n_out:
                    if done:
                        load = max(1.0, self.running / self.max_batch * self.slowdown)
                        deadline += self.tpot_s * load * self.tokens_per_chunk
                    await asyncio.sleep(max(0.0, deadline - loop.time()))
                    k = min(self.tokens_per_chunk if done else 1, n_out - done)
                    done += k
                    if stream:
                        ev = {"choices": [{"index": 0, "text": "x" * k,
                                           "finish_reason": "length" if done == n_out else None}],
                              "usage": {"prompt_tokens": n_prompt, "completion_tokens": done,
                                        "total_tokens": n_prompt + done} if self.chunk_usage else None}
                        writer.write(f"data: {json.dumps(ev)}\n\n".encode())
                        await writer.drain()
            finally:
                self.running -= 1
        usage = {"prompt_tokens": n_prompt, "completion_tokens": n_out, "total_tokens": n_prompt + n_out}
        if stream:
            final = {"choices": [], "usage": usage}
            writer.write(f"data: {json.dumps(final)}\n\ndata: [DONE]\n\n".encode())
            await writer.drain()
        else:
            await self._send(writer, 200, {"choices": [{"index": 0, "text": "x" * n_out,
                                                        "finish_reason": "length"}], "usage": usage})
