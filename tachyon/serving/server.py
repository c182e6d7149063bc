"""Run the app under uvicorn with a graceful drain.

First SIGTERM/SIGINT: readiness turns 503 and new API calls get 503 at once (the listening socket
stays open so clients read that answer); admitted requests run to completion for up to
`drain_timeout` seconds; then uvicorn shuts down (anything still running is cancelled, which
aborts its engine requests) and the process exits 0. A second signal exits at once.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import sys
from types import FrameType

import uvicorn

from tachyon.serving.app import create_app
from tachyon.serving.middleware import GuardedH11Protocol
from tachyon.serving.state import ServerState

logger = logging.getLogger("tachyon.serving")


class DrainingServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, state: ServerState) -> None:
        super().__init__(config)
        self.state = state
        self._loop: asyncio.AbstractEventLoop | None = None
        self._drain_task: asyncio.Task[None] | None = None

    async def startup(self, sockets: list | None = None) -> None:  # type: ignore[override]
        self._loop = asyncio.get_running_loop()
        await super().startup(sockets)
        if self.should_exit:
            return
        port = self.config.port
        if self.servers and self.servers[0].sockets:
            port = self.servers[0].sockets[0].getsockname()[1]
        names = ", ".join(n for m in self.state.registry.models for n in m.names)
        print(
            f"Tachyon OpenAI-compatible server for [{names}] at http://{self.config.host}:{port}/v1",
            flush=True,
        )
        print(f"READY http://{self.config.host}:{port}", flush=True)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.state.admission.draining or self._loop is None:
            self.should_exit = True
            self.force_exit = True
            return
        self.state.admission.draining = True
        self._loop.call_soon_threadsafe(self._begin_drain)

    def _begin_drain(self) -> None:
        self._drain_task = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        timeout = self.state.config.drain_timeout
        logger.info("draining", extra={"in_flight": self.state.admission.in_flight, "timeout_s": timeout})
        finished = await self.state.admission.wait_idle(timeout)
        if not finished:
            logger.warning(
                "drain timeout: cancelling remaining requests",
                extra={"in_flight": self.state.admission.in_flight},
            )
        self.should_exit = True


def listen_socket(host: str, port: int) -> socket.socket:
    """A socket bound to (host, port), as uvicorn would bind it (SO_REUSEADDR; port 0 picks a free one). Bound
    before the models load, so a taken port or a bad host fails in a second, not after a model's start-up.
    Raises ValueError naming the address."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET  # uvicorn's rule ("localhost" is IPv4)
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except (OSError, OverflowError) as e:
        sock.close()
        raise ValueError(f"--host / --port: cannot listen on {host}:{port}: {getattr(e, 'strerror', None) or e}") \
            from None
    sock.set_inheritable(True)
    return sock


def serve(state: ServerState, sock: socket.socket | None = None) -> int:
    """Serve until drained (on `sock` if given, a socket from listen_socket that serve then owns); engines are
    shut down on the way out. Returns the exit code."""
    cfg = state.config
    config = uvicorn.Config(
        create_app(state),
        host=cfg.host,
        port=cfg.port,
        http=type("TachyonH11Protocol", (GuardedH11Protocol,), {"head_timeout": cfg.header_timeout}),
        h11_max_incomplete_event_size=cfg.max_header_bytes,
        lifespan="off",
        log_config=None,
        access_log=False,
        server_header=False,
        timeout_keep_alive=5,
        timeout_graceful_shutdown=2,
        log_level=cfg.log_level.lower(),
    )
    server = DrainingServer(config, state)
    try:
        server.run(sockets=[sock] if sock is not None else None)
    finally:
        state.registry.shutdown()
        if sock is not None:
            sock.close()
    return 0 if server.started else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use `tachyon serve`")
