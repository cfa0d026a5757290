"""The HTTP decision service: a Starlette (ASGI) application over a `Registry` (docs/serve.md).

    GET  /health                               liveness and what is served
    GET  /v1/campaigns                         every campaign and whether it is served
    GET  /v1/campaigns/{campaign}              champion, version, λ per budget, when it was decided
    POST /v1/campaigns/{campaign}/decide       {"user": {...}} or {"users": [...]} (+ "budget")

Errors are JSON `{"detail": ..., "field": ...}`: 422 for a body the campaign refuses (the field
named), 404 for an unknown campaign or path, 409 for a campaign without a champion or decisions (the
reason), 413 for a body over the size limit. A failure while deciding is a 500 without internals in
the body (logged with its type); bad input never gets there.

No dagster here (domain code).
"""

from __future__ import annotations

import json
import logging
import threading
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from promo_assets.serve.registry import Registry
from promo_assets.serve.state import RequestError, Unavailable

log = logging.getLogger("promo_assets.serve")

MAX_BODY = 8 * 1024 * 1024  # bytes: a batch of MAX_BATCH users with a few dozen features fits


def _error(status: int, detail: str, field: str | None = None) -> JSONResponse:
    body = {"detail": detail}
    if field is not None:
        body["field"] = field
    return JSONResponse(body, status_code=status)


def _lookup(registry: Registry, campaign: str):
    """(state, None) or (None, error response) for a campaign of the current snapshot."""
    state = registry.snapshot().get(campaign)
    if state is None:
        known = ", ".join(sorted(registry.snapshot())) or "none"
        return None, _error(404, f"unknown campaign '{campaign}' (served: {known})", "campaign")
    if isinstance(state, Unavailable):
        return None, _error(409, state.reason, "campaign")
    return state, None


def create_app(registry: Registry, reload_interval: float = 2.0) -> Starlette:
    """The ASGI app; with `reload_interval` > 0 a daemon thread reloads the registry on change."""

    @asynccontextmanager
    async def lifespan(app):
        await run_in_threadpool(registry.refresh, True)
        stop = threading.Event()
        watcher = None
        if reload_interval > 0:
            watcher = threading.Thread(target=registry.watch, args=(reload_interval, stop), name="promo-serve-reload",
                                       daemon=True)
            watcher.start()
        try:
            yield
        finally:
            stop.set()
            if watcher is not None:
                watcher.join(timeout=5)

    async def health(request: Request) -> JSONResponse:
        snap = registry.snapshot()
        return JSONResponse({"status": "ok", "loaded_at": registry.loaded_at, "reloads": registry.reloads,
                             "reload_error": registry.last_error,
                             "campaigns": {n: ({"ready": True, "champion": s.champion,
                                                "champion_version": s.champion_version}
                                               if not isinstance(s, Unavailable) else {"ready": False})
                                           for n, s in sorted(snap.items())}})

    async def campaigns(request: Request) -> JSONResponse:
        return JSONResponse({"campaigns": [s.describe() for _, s in sorted(registry.snapshot().items())]})

    async def campaign(request: Request) -> JSONResponse:
        state, error = _lookup(registry, request.path_params["campaign"])
        return error or JSONResponse(state.describe())

    async def decide(request: Request) -> JSONResponse:
        state, error = _lookup(registry, request.path_params["campaign"])  # this request's state, whatever reloads
        if error:
            return error
        size = request.headers.get("content-length")
        if size is not None and (not size.isdigit() or int(size) > MAX_BODY):
            return _error(413, f"the body is larger than {MAX_BODY} bytes: send fewer users per request", "body")
        raw = await request.body()
        if len(raw) > MAX_BODY:
            return _error(413, f"the body is larger than {MAX_BODY} bytes: send fewer users per request", "body")
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            return _error(422, f"not valid JSON: {exc}", "body")
        try:
            budget, ids, frame = state.parse(body)
        except RequestError as exc:
            return _error(422, exc.message, exc.field)
        try:
            if len(ids) > 64:  # a batch: off the event loop, so /health and single users stay quick
                out = await run_in_threadpool(state.decide, budget, ids, frame)
            else:
                out = state.decide(budget, ids, frame)
        except Exception as exc:  # noqa: BLE001 (the model failed: no internals in the answer)
            log.error("%s: deciding failed: %s", state.campaign, type(exc).__name__)
            return _error(500, f"the champion's model failed to decide ({type(exc).__name__}); see the service's log")
        return JSONResponse(out)

    async def not_found(request: Request, exc: HTTPException) -> JSONResponse:
        return _error(exc.status_code, exc.detail if isinstance(exc.detail, str) else "error")

    return Starlette(
        routes=[Route("/health", health, methods=["GET"]),
                Route("/v1/campaigns", campaigns, methods=["GET"]),
                Route("/v1/campaigns/{campaign}", campaign, methods=["GET"]),
                Route("/v1/campaigns/{campaign}/decide", decide, methods=["POST"])],
        exception_handlers={HTTPException: not_found}, lifespan=lifespan)
