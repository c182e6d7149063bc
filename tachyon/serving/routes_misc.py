"""GET /v1/models, POST /tokenize and /detokenize, GET /health, /health/ready, /metrics, /version."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST

import tachyon
from tachyon.serving.api import Call, parse_body, serve_call
from tachyon.serving.preprocess import chat_prompt, decode_ids, encode
from tachyon.serving.protocol import DetokenizeRequest, TokenizeRequest
from tachyon.serving.state import ServerState

router = APIRouter()


def _state(request: Request) -> ServerState:
    return request.app.state.tachyon


@router.get("/v1/models")
async def list_models(request: Request) -> Response:
    return await serve_call(request, "models", "models", _models)


async def _models(call: Call) -> Response:
    data = [
        {
            "id": name,
            "object": "model",
            "created": m.created,
            "owned_by": "tachyon",
            "root": m.name,
            "parent": None,
            "max_model_len": m.max_model_len,
        }
        for m in call.state.registry.models
        for name in m.names
    ]
    return JSONResponse({"object": "list", "data": data})


@router.post("/tokenize")
async def tokenize(request: Request) -> Response:
    return await serve_call(request, "tokenize", "tok", _tokenize)


async def _tokenize(call: Call) -> Response:
    req = await parse_body(call.request, TokenizeRequest, call.state.config.body_timeout)
    model = call.state.registry.get(req.model)
    if req.messages is not None:
        ids = await chat_prompt(model, req.messages, add_generation_prompt=req.add_generation_prompt)
    else:
        ids = await encode(model, req.prompt or "", add_special_tokens=req.add_special_tokens)
    call.record.model, call.record.prompt_tokens = model.name, len(ids)
    return JSONResponse({"count": len(ids), "max_model_len": model.max_model_len, "tokens": ids})


@router.post("/detokenize")
async def detokenize(request: Request) -> Response:
    return await serve_call(request, "detokenize", "detok", _detokenize)


async def _detokenize(call: Call) -> Response:
    req = await parse_body(call.request, DetokenizeRequest, call.state.config.body_timeout)
    model = call.state.registry.get(req.model)
    text = await decode_ids(model, req.tokens, "tokens")
    call.record.model = model.name
    return JSONResponse({"prompt": text})


@router.get("/health")
async def health(request: Request) -> Response:
    ok, why = _state(request).readiness.alive()
    return JSONResponse({"status": "ok" if ok else "unhealthy", "detail": why}, status_code=200 if ok else 503)


@router.get("/health/ready")
async def ready(request: Request) -> Response:
    ok, why = await _state(request).readiness.ready()
    headers = {} if ok else {"Retry-After": "5"}
    return JSONResponse(
        {"status": "ready" if ok else "unavailable", "detail": why},
        status_code=200 if ok else 503,
        headers=headers,
    )


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    return Response(_state(request).metrics.render(), media_type=CONTENT_TYPE_LATEST)


@router.get("/version")
async def version() -> Response:
    return JSONResponse({"version": tachyon.__version__})
