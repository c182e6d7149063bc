"""Plumbing shared by the API routes: the guard sequence every call passes, body parsing off the
loop, the disconnect watch for non-streaming calls, and the SSE response that always cleans up.

Guard order: (middleware: head 431, declared body 413) -> drain gate (503) -> API key (401) ->
per-key request rate (429) -> one admission slot (429) -> body (400/408/413) -> model (404) ->
limits (400) -> token rate (429) -> admission grown to n x prompts (429). Each refusal is logged
as one access line and counted in `tachyon:http_requests_rejected_total{reason}`.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import anyio
from fastapi import Request, Response
from pydantic import BaseModel, ValidationError
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from tachyon.serving.admission import Ticket
from tachyon.serving.errors import APIError, validation_message
from tachyon.serving.reqlog import RequestRecord
from tachyon.serving.state import ServerState

M = TypeVar("M", bound=BaseModel)
_THREAD_PARSE_BYTES = 256 * 1024


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


class Call:
    """One API call in flight: its record, key, admission ticket and the cleanup to run once."""

    def __init__(self, request: Request, route: str, id_prefix: str) -> None:
        self.request = request
        self.state: ServerState = request.app.state.tachyon
        self.record = RequestRecord(request_id=new_id(id_prefix), route=route)
        self.key = "anonymous"
        self.ticket: Ticket | None = None
        self.cleanups: list[Callable[[], None]] = []
        self._finished = False

    @property
    def id(self) -> str:
        return self.record.request_id

    def fail(self, err: APIError) -> None:
        self.record.status = err.status
        self.record.error_code = err.code
        reason = err.code or str(err.status)
        self.state.metrics.rejected.labels(reason).inc()

    def finish(self) -> None:
        """Release admission, charge tokens, write the access line. Idempotent."""
        if self._finished:
            return
        self._finished = True
        for fn in self.cleanups:
            fn()
        if self.ticket is not None:
            self.ticket.release()
        r = self.record
        self.state.limiter.charge_tokens(self.key, r.prompt_tokens + r.completion_tokens)
        self.state.metrics.http.labels(r.route, str(r.status)).inc()
        r.emit()

    def finish_stream(self, completed: bool) -> None:
        """`finish` for SSE responses; a stream the client left early is logged as 499."""
        if not completed and self.record.status < 400:
            self.record.status = 499
            self.record.error_code = "client_disconnected"
        self.finish()

    def admit(self, cost: int) -> None:
        """Hold `cost` admission slots (taken before the body is read, grown once `n` is known)."""
        capacity = self.state.admission.capacity
        if cost > capacity:
            raise APIError(
                400,
                f"n x prompts = {cost} sequences exceeds the server's capacity of {capacity}.",
                param="n",
                code="too_many_sequences",
            )
        if self.ticket is None:
            self.ticket = self.state.admission.acquire(cost)
        else:
            self.ticket.grow(cost)


async def serve_call(
    request: Request, route: str, id_prefix: str, handler: Callable[[Call], Awaitable[Response]]
) -> Response:
    """Run the guards, then `handler`; non-streaming responses are finished here."""
    call = Call(request, route, id_prefix)
    st = call.state
    try:
        st.admission.check_open()
        key_id = st.keys.check(request.headers.get("authorization"))
        call.record.key_id = key_id
        call.key = key_id or f"ip:{request.client.host if request.client else '?'}"
        st.limiter.hit_request(call.key)
        response = await handler(call)
    except APIError as e:
        call.fail(e)
        call.finish()
        response = e.response()
        response.headers["x-request-id"] = call.id
        return response
    except BaseException:
        call.record.status = 500 if call.record.status < 400 else call.record.status
        call.finish()
        raise
    response.headers["x-request-id"] = call.id
    if not isinstance(response, SSEResponse):
        call.finish()
    return response


async def parse_body(request: Request, model: type[M], timeout: float = 60.0) -> M:
    """Read (at most `timeout` s) and validate the JSON body; large bodies are parsed in a thread."""
    try:
        raw = await asyncio.wait_for(request.body(), timeout)
    except asyncio.TimeoutError:
        raise APIError(
            408,
            f"The request body did not arrive within {timeout:g} s.",
            code="body_timeout",
            headers={"x-should-retry": "false", "Connection": "close"},
        ) from None
    if not raw.strip():
        raise APIError(400, "The request body is empty; send a JSON object.", code="invalid_json")

    def parse() -> M:
        return model.model_validate_json(raw)

    try:
        if len(raw) > _THREAD_PARSE_BYTES:
            return await anyio.to_thread.run_sync(parse)
        return parse()
    except ValidationError as e:
        errs = e.errors(include_input=False, include_url=False)
        if errs and errs[0].get("type") == "json_invalid":  # where and why, e.g. nesting past the parser's limit
            detail = str(errs[0].get("msg", "")).removeprefix("Invalid JSON: ")[:200]
            if "recursion limit" in detail:
                detail += " (values nest at most ~200 levels deep)"
            raise APIError(400, f"The request body is not valid JSON: {detail}.", code="invalid_json") from None
        if errs and errs[0].get("type") == "model_type":
            raise APIError(400, "The request body must be a JSON object.", code="invalid_json") from None
        msg, param = validation_message(errs)
        raise APIError(400, msg, param=param, code="invalid_value") from None


async def _wait_disconnect(request: Request) -> None:
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


async def until_disconnect(request: Request, work: Awaitable[Any]) -> Any:
    """Await `work`; if the client goes away first, cancel it (which aborts its engine requests)."""
    task = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(_wait_disconnect(request))
    try:
        await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    if task.cancelled():
        raise APIError(499, "client closed the request", code="client_disconnected")
    return task.result()


class SSEResponse(StreamingResponse):
    """`text/event-stream` whose `on_close(completed)` runs however the stream ends (even unstarted)."""

    def __init__(self, content: AsyncIterator[bytes], on_close: Callable[[bool], None]) -> None:
        self._source = content
        self._completed = False
        super().__init__(
            self._tracked(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
        self._on_close = on_close

    async def _tracked(self) -> AsyncIterator[bytes]:
        async for chunk in self._source:
            yield chunk
        self._completed = True

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            for it in (self.body_iterator, self._source):
                aclose = getattr(it, "aclose", None)
                if aclose is not None:
                    await aclose()
            self._on_close(self._completed)
