"""The FastAPI application: `create_app(state)` wires routes, error handlers and the request-size limits."""

from __future__ import annotations

from fastapi import FastAPI
from starlette.types import ASGIApp

from tachyon.serving import routes_chat, routes_completions, routes_misc
from tachyon.serving.errors import install_error_handlers
from tachyon.serving.middleware import RequestLimits
from tachyon.serving.state import ServerState


def create_app(state: ServerState) -> ASGIApp:
    """ASGI app serving `state` (engines already started). The caller owns engine shutdown."""
    app = FastAPI(title="Tachyon OpenAI-compatible server", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.tachyon = state
    install_error_handlers(app)
    for module in (routes_chat, routes_completions, routes_misc):
        app.include_router(module.router)
    return RequestLimits(app, state.config.max_body_bytes, state.config.max_header_bytes)
