"""`bench serve` load generator: send a request set to an OpenAI-compatible server, record each request.

Contract: `run_point(cfg, requests)` runs one load point and returns a `Run` whose records hold
scheduled (open loop), sent, first-byte, per-chunk and last-byte times, and whose summary carries
the client-health warnings: dispatch lag (sent later than scheduled for reasons other than the
concurrency cap) p99 above `LAG_WARN_S`, or sends spread over > 110% of the schedule's span, means
the client itself saturated and the numbers under-report the server.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx

from tachyon.bench.arrival import arrival_times
from tachyon.bench.client import now_clock, send
from tachyon.bench.datasets import ServeRequest
from tachyon.bench.metrics import summarize
from tachyon.bench.progress import LoadProgress
from tachyon.bench.schema import SLO, RequestRecord, Run

LAG_WARN_S = 0.050


@dataclass
class LoadConfig:
    base_url: str
    model: str
    process: str = "poisson"  # closed | constant | poisson | gamma
    rate: float | None = None  # req/s for open loop; None/inf = all at once
    concurrency: int | None = None  # closed loop: workers; open loop: cap on requests in flight
    burstiness: float = 1.0
    seed: int = 0
    stream: bool = True
    timeout_s: float = 600.0
    continuous_usage: bool = True
    exact_chunk_tokens: bool = False
    extra_body: dict[str, Any] = field(default_factory=dict)
    progress: bool = False
    api_key: str | None = None

    def label(self) -> str:
        if self.process == "closed":
            return f"concurrency={self.concurrency}"
        rate = "inf" if not self.rate else f"{self.rate:g}"
        cap = f",cap={self.concurrency}" if self.concurrency else ""
        return f"{self.process}:rate={rate}{cap}"

    def describe(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("progress")
        d["api_key"] = "***" if self.api_key else None
        return d


async def _run(cfg: LoadConfig, reqs: list[ServeRequest]) -> list[RequestRecord]:
    url = cfg.base_url.rstrip("/") + ("/completions" if cfg.base_url.rstrip("/").endswith("/v1")
                                      else "/v1/completions")
    n = len(reqs)
    width = cfg.concurrency or n
    limits = httpx.Limits(max_connections=width, max_keepalive_connections=width)
    schedule = arrival_times(n, cfg.process, cfg.rate, cfg.burstiness, cfg.seed)
    if schedule is None and not cfg.concurrency:
        raise ValueError("closed-loop load needs --concurrency")
    records = [RequestRecord(id=str(i), prompt_tokens=r.prompt_len or 0, max_tokens=r.max_tokens, sent=0.0)
               for i, r in enumerate(reqs)]
    headers = {"Authorization": f"Bearer {cfg.api_key}"} if cfg.api_key else None
    async with httpx.AsyncClient(timeout=httpx.Timeout(cfg.timeout_s), limits=limits, headers=headers,
                                 trust_env=False) as client:
        clock = now_clock()
        sem = asyncio.Semaphore(cfg.concurrency) if (cfg.concurrency and schedule is not None) else None
        with LoadProgress(n, cfg.label(), cfg.rate, cfg.progress) as prog:

            async def one(i: int) -> None:
                rec = records[i]
                if sem is not None:
                    t_wait = clock()
                    await sem.acquire()
                    rec.queue_wait = clock() - t_wait
                try:
                    rec.sent = clock()
                    prog.sent()
                    await send(client, url, reqs[i], cfg.model, rec, clock, cfg.stream, cfg.extra_body,
                               cfg.continuous_usage, cfg.exact_chunk_tokens)
                    prog.finished(rec.error is not None)
                finally:
                    if sem is not None:
                        sem.release()

            if schedule is None:
                queue = iter(range(n))

                async def worker() -> None:
                    for i in queue:
                        await one(i)

                await asyncio.gather(*(worker() for _ in range(min(cfg.concurrency or n, n))))
            else:
                tasks = []
                for i, at in enumerate(schedule):
                    delay = at - clock()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    records[i].scheduled = at
                    tasks.append(asyncio.create_task(one(i)))
                await asyncio.gather(*tasks)
    return records


def client_warnings(cfg: LoadConfig, run: Run) -> list[str]:
    out = []
    lag = run.summary.dispatch_lag
    if lag.p99 is not None and lag.p99 > LAG_WARN_S:
        out.append(f"{run.label}: client dispatch lag p99 {lag.p99 * 1e3:.0f} ms > "
                   f"{LAG_WARN_S * 1e3:.0f} ms: "
                   "the load generator is saturated; results under-report the server")
    sched = [r for r in run.requests if r.scheduled is not None]
    if len(sched) > 2:
        planned = max(r.scheduled for r in sched) - min(r.scheduled for r in sched)
        actual = max(r.sent for r in sched) - min(r.sent for r in sched)
        if planned > 0 and actual > 1.1 * planned and not cfg.concurrency:
            out.append(f"{run.label}: sends took {actual:.2f}s for a {planned:.2f}s schedule: the client fell behind")
    inferred = sum(r.chunk_tokens_inferred for r in run.requests)
    if inferred:
        out.append(f"{run.label}: {inferred} requests got multi-token chunks without per-chunk counts "
                   "(no continuous usage stats): ITL spread evenly; use --exact-chunk-tokens for exact ITL")
    return out


def run_point(cfg: LoadConfig, reqs: list[ServeRequest], slo: SLO | None = None) -> Run:
    records = asyncio.run(_run(cfg, reqs))
    run = Run(label=cfg.label(), config=cfg.describe(), summary=summarize(records, slo), requests=records)
    if cfg.rate and cfg.process != "closed":
        run.summary.extra["offered_rate"] = cfg.rate
    run.summary.extra["warnings"] = client_warnings(cfg, run)
    return run
