"""Transport-level guards below FastAPI.

`RequestLimits` (ASGI): request heads larger than the cap get 431; a declared Content-Length
over the body limit is refused with 413 before a byte of the body is read; a chunked body is
counted as it arrives and refused once it passes the limit. uvicorn drains and discards the
unread rest, so the client reads its 413.

`GuardedH11Protocol`: uvicorn's h11 protocol whose own refusals (a head over h11's incomplete-
event cap while it trickles in, malformed HTTP) are OpenAI-shaped JSON errors too, and which
closes connections whose request head does not arrive in time (slow-header clients).
"""

from __future__ import annotations

import asyncio

from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from tachyon.serving.errors import APIError, error_bytes


async def _send_error(send: Send, status: int, message: str, code: str) -> None:
    body = error_bytes(status, message, code=code)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


class _TooLarge(APIError):
    """Raised from `receive`: the route's APIError handling answers 413 (or we do, if it did not)."""


class RequestLimits:
    def __init__(self, app: ASGIApp, max_bytes: int, max_header_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.max_header_bytes = max_header_bytes

    def _message(self) -> str:
        return f"The request body is larger than the server's limit of {self.max_bytes} bytes."

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        head = len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"")
        head += sum(len(k) + len(v) + 4 for k, v in scope["headers"])
        if head > self.max_header_bytes:
            await _send_error(
                send,
                431,
                f"The request headers are larger than the server's limit of {self.max_header_bytes} bytes.",
                "request_header_fields_too_large",
            )
            return
        for name, value in scope["headers"]:
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await _send_error(send, 400, "Content-Length is not a number.", "invalid_header")
                    return
                if declared > self.max_bytes:
                    await _send_error(send, 413, self._message(), "request_too_large")
                    return
        seen = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise _TooLarge(413, self._message(), code="request_too_large")
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _TooLarge:
            if not started:
                await _send_error(send, 413, self._message(), "request_too_large")


def _raw_response(status: int, message: str, code: str) -> bytes:
    body = error_bytes(status, message, code=code)
    head = (
        f"HTTP/1.1 {status} \r\ncontent-type: application/json\r\nconnection: close\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, hardened: its protocol-error answers are JSON errors (431 for a head
    over the size cap), and a request head must arrive within `head_timeout` seconds of its first
    byte (or of the connection opening), so slow-header clients cannot hold connections forever."""

    head_timeout: float = 10.0
    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:  # type: ignore[override]
        super().connection_made(transport)  # type: ignore[arg-type]
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._head_pending():
            if self._head_timer is None:
                self._arm_head_timer()
        else:
            self._cancel_head_timer()

    def _head_pending(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _arm_head_timer(self) -> None:
        self._cancel_head_timer()
        self._head_timer = self.loop.call_later(self.head_timeout, self._on_head_timeout)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _on_head_timeout(self) -> None:
        self._head_timer = None
        if not self._head_pending() or self.transport.is_closing():
            return
        if len(getattr(self.conn, "_receive_buffer", b"")):  # a head started but never finished
            msg = f"The request headers did not arrive within {self.head_timeout:g} s."
            self.transport.write(_raw_response(408, msg, "header_timeout"))
        self.transport.close()

    def send_400_response(self, msg: str) -> None:
        limit = getattr(self.conn, "_max_incomplete_event_size", None)
        buffered = len(getattr(self.conn, "_receive_buffer", b""))
        if limit is not None and buffered > limit:
            out = _raw_response(
                431,
                f"The request headers are larger than the server's limit of {limit} bytes.",
                "request_header_fields_too_large",
            )
        else:
            out = _raw_response(400, "Invalid HTTP request received.", "invalid_http_request")
        self.transport.write(out)
        self.transport.close()
