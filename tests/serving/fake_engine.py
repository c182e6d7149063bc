"""A stand-in with AsyncEngine's API (docs/architecture.md), for developing the server before the
real engine exists. Deterministic "model": token t+1 = (31 * t + 7 * position + 3) % vocab.
Select with TACHYON_ENGINE_CLASS=tests.serving.fake_engine:FakeAsyncEngine."""

from __future__ import annotations

import asyncio
import math
import queue
import threading
import time
from dataclasses import dataclass

from tachyon.sampling import CompletionOutput, Logprob, RequestMetrics, RequestOutput


@dataclass
class FakeStats:
    num_running: int
    num_waiting: int
    kv_cache_usage: float
    num_free_blocks: int
    num_total_blocks: int
    num_preemptions: int = 0


class _Req:
    def __init__(self, rid, ids, params, loop, q):
        self.rid, self.ids, self.params, self.loop, self.q = rid, ids, params, loop, q
        self.outs = [[] for _ in range(params.n)]
        self.blocks = 0
        self.metrics = RequestMetrics(arrival_time=time.time())
        self.done = False


class FakeAsyncEngine:
    def __init__(self, config):
        from transformers import AutoTokenizer

        self.config = config
        self.tokenizer = AutoTokenizer.from_pretrained(config.model)
        self.max_model_len = config.max_model_len or 2048
        self.total_blocks = config.num_kv_blocks or 512
        self.block_size = config.block_size
        self.free_blocks = self.total_blocks
        self.step_s = float(getattr(config, "seed", 0) or 0) / 1000 or 0.004
        self._inbox: queue.Queue = queue.Queue()
        self._aborts: queue.Queue = queue.Queue()
        self._running: dict[str, _Req] = {}
        self._waiting: list[_Req] = []
        self._stop = False
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def get_tokenizer(self):
        return self.tokenizer

    def is_healthy(self):
        return self._thread.is_alive()

    def shutdown(self):
        self._stop = True
        self._thread.join(timeout=2)

    def stats(self):
        return FakeStats(
            len(self._running),
            len(self._waiting),
            1 - self.free_blocks / self.total_blocks,
            self.free_blocks,
            self.total_blocks,
        )

    def abort(self, rid):
        self._aborts.put(rid)

    async def generate(self, prompt, params, request_id):
        ids = self.tokenizer.encode(prompt) if isinstance(prompt, str) else list(prompt)
        if len(ids) + (params.max_tokens or 0) > self.max_model_len:
            raise ValueError(f"prompt + max_tokens exceeds max_model_len={self.max_model_len}")
        q: asyncio.Queue = asyncio.Queue()
        req = _Req(request_id, ids, params, asyncio.get_running_loop(), q)
        self._inbox.put(req)
        try:
            while True:
                out = await q.get()
                yield out
                if out.finished:
                    return
        finally:
            if not req.done:
                self.abort(request_id)

    # engine thread -------------------------------------------------------------------------------
    def _loop(self):
        while not self._stop:
            while not self._inbox.empty():
                self._waiting.append(self._inbox.get())
            while not self._aborts.empty():
                rid = self._aborts.get()
                for r in list(self._waiting):
                    if r.rid == rid:
                        self._waiting.remove(r)
                        self._finish(r, "abort")
                if rid in self._running:
                    self._finish(self._running.pop(rid), "abort")
            while self._waiting and len(self._running) < self.config.max_num_seqs:
                r = self._waiting[0]
                need = math.ceil((len(r.ids) + r.params.max_tokens) / self.block_size) * r.params.n
                if need > self.free_blocks:
                    break
                self._waiting.pop(0)
                r.blocks = need
                self.free_blocks -= need
                r.metrics.first_scheduled_time = time.time()
                self._running[r.rid] = r
            for r in list(self._running.values()):
                self._step(r)
            time.sleep(self.step_s)

    def _finish(self, r, reason):
        self.free_blocks += r.blocks
        r.blocks = 0
        r.done = True
        self._emit(r, reason, force=reason)

    def _step(self, r):
        p = r.params
        reasons = []
        for k, toks in enumerate(r.outs):
            prev = toks[-1] if toks else r.ids[-1]
            seed = (p.seed or 0) * 13 + k * 101 if p.temperature > 0 else 0
            toks.append((31 * prev + 7 * len(toks) + 3 + seed) % 49000 + 100)
            text = self.tokenizer.decode(toks, skip_special_tokens=True)
            if any(s in text for s in p.stop):
                reasons.append("stop")
            elif len(toks) >= p.max_tokens:
                reasons.append("length")
        if len(reasons) == len(r.outs):
            self._running.pop(r.rid)
            self.free_blocks += r.blocks
            r.blocks = 0
            r.done = True
        self._emit(r, None)

    def _emit(self, r, reason, force=None):
        p = r.params
        outs = []
        for k, toks in enumerate(r.outs):
            text = self.tokenizer.decode(toks, skip_special_tokens=True)
            fin = force
            for s in p.stop:
                if s in text:
                    text, fin = text[: text.index(s)], fin or "stop"
            if fin is None and r.done:
                fin = "length"
            lps = None
            if p.logprobs is not None:
                lps = [
                    {t: Logprob(-0.5, 1)} | {(t + j + 1) % 49152: Logprob(-1.0 - j, j + 2) for j in range(p.logprobs)}
                    for t in toks
                ]
            outs.append(CompletionOutput(k, text, list(toks), None, lps, fin if r.done else None))
        plp = None
        if p.prompt_logprobs is not None:
            plp = [None] + [{t: Logprob(-2.0, 1)} for t in r.ids[1:]]
        out = RequestOutput(r.rid, None, r.ids, plp, outs, r.done, r.metrics)
        r.loop.call_soon_threadsafe(r.q.put_nowait, out)
