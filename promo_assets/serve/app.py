"""The HTTP decision service: a Starlette (ASGI) application over a `Registry` (docs/serve.md).

    GET  /health                               liveness and what is served
    GET  /v1/campaigns                         every campaign and whether it is served
    GET  /v1/campaigns/{campaign}              champion, version, λ per budget, when it was decided
    POST /v1/campaigns/{campaign}/decide       {"user": {...}} or {"users": [...]} (+ "budget")

Errors are JSON `{"detail": ..., "field": ...}`: 422 for a body the campaign refuses (the field
named), 404 for an unknown campaign or path, 409 for a campaign without a champion or decisions (the
reason), 503 while no snapshot could be loaded yet (a warehouse that cannot be read: the reason), 413
for a body over the size limit (answered as soon as the limit is passed, while the client still
sends: the body is read in pieces, chunked or not, and never held beyond the limit),
408 for a body not received within the read timeout, 415 for a body that is not
`Content-Type: application/json`. A failure while deciding is a 500 without internals in the body
(logged with its type); bad input never gets there. No answer names a path of the server.

JSON is parsed and written by orjson (a body nested deeper than 1,024 levels, a number beyond
float64, NaN / Infinity and a lone UTF-16 surrogate are "not valid JSON"); one user is decided on the
event loop (well under a millisecond with a compiled plan), a batch in the thread pool.

No dagster here (domain code).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from contextlib import asynccontextmanager

import orjson
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from promo_assets.serve.registry import Registry
from promo_assets.serve.state import RequestError, Unavailable, _key

log = logging.getLogger("promo_assets.serve")

MAX_BODY = 8 * 1024 * 1024  # bytes: a batch of MAX_BATCH users with a few dozen features fits
READ_TIMEOUT = 10.0  # seconds to receive a request's body
INLINE_USERS = 64  # a request of at most this many users is decided on the event loop


class JSONResponse(Response):
    """A JSON answer written by orjson."""

    media_type = "application/json"

    def render(self, content) -> bytes:
        return orjson.dumps(content, option=orjson.OPT_SERIALIZE_NUMPY)


class _TooLarge(Exception):
    pass


def _error(status: int, detail: str, field: str | None = None, headers: dict | None = None) -> JSONResponse:
    body = {"detail": detail}
    if field is not None:
        body["field"] = field
    return JSONResponse(body, status_code=status, headers=headers)


def _json_type(value: str | None) -> bool:
    """True for `application/json` (any parameters, e.g. charset) or a `+json` type."""
    kind = (value or "").split(";", 1)[0].strip().lower()
    return kind == "application/json" or (kind.startswith("application/") and kind.endswith("+json"))


async def _read_body(request: Request, limit: int) -> bytes:
    """The body, read in pieces as they arrive; _TooLarge as soon as it passes `limit` bytes (the rest is
    never read)."""
    parts, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _TooLarge
        parts.append(chunk)
    return b"".join(parts)


def _header(value: str | None) -> str:
    if value is None:
        return "none"
    text = "".join(c if c.isprintable() else "?" for c in value[:60])
    return f"'{text}'"


def _lookup(registry: Registry, campaign: str):
    """(state, None) or (None, error response) for a campaign of the current snapshot."""
    state = registry.snapshot().get(campaign)
    if state is None and registry.loaded_at is None and registry.last_error:
        # nothing was ever loaded: the campaign may well exist, the warehouse could not be read
        return None, _error(503, f"campaign '{_key(campaign)}' is not served yet: the warehouse could not be read "
                                 f"({registry.last_error}); the service retries on every change", "campaign")
    if state is None:
        known = ", ".join(sorted(registry.snapshot())) or "none"
        return None, _error(404, f"unknown campaign '{_key(campaign)}' (served: {known})", "campaign")
    if isinstance(state, Unavailable):
        return None, _error(409, state.reason, "campaign")
    return state, None


def create_app(registry: Registry, reload_interval: float = 2.0, read_timeout: float = READ_TIMEOUT) -> Starlette:
    """The ASGI app; with `reload_interval` > 0 a daemon thread reloads the registry on change;
    `read_timeout`: seconds a request's body may take to arrive (408 after)."""

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
                                                "champion_version": s.champion_version, **s.freshness()}
                                               if not isinstance(s, Unavailable) else {"ready": False})
                                           for n, s in sorted(snap.items())}})

    async def campaigns(request: Request) -> JSONResponse:
        return JSONResponse({"campaigns": [s.describe() for _, s in sorted(registry.snapshot().items())]})

    async def campaign(request: Request) -> JSONResponse:
        state, error = _lookup(registry, request.path_params["campaign"])
        return error or JSONResponse(state.describe())

    too_large = f"the body is larger than {MAX_BODY} bytes: send fewer users per request"

    async def decide(request: Request) -> JSONResponse:
        state, error = _lookup(registry, request.path_params["campaign"])  # this request's state, whatever reloads
        if error:
            return error
        size = request.headers.get("content-length")
        if size is not None and (not size.isdigit() or int(size) > MAX_BODY):
            return _error(413, too_large, "body", {"Connection": "close"})
        if not _json_type(request.headers.get("content-type")):
            return _error(415, "the body must be JSON, sent with the header Content-Type: application/json (got "
                          f"{_header(request.headers.get('content-type'))})", "body")
        try:
            async with asyncio.timeout(read_timeout):  # a deadline on this task (no task of its own, as wait_for makes)
                raw = await _read_body(request, MAX_BODY)
        except _TooLarge:  # answered now, while the client may still be sending; the connection is closed
            return _error(413, too_large, "body", {"Connection": "close"})
        except asyncio.TimeoutError:
            return _error(408, f"the body did not arrive within {read_timeout:g} seconds", "body", {"Connection": "close"})
        except ClientDisconnect:  # the client left before its body ended: nobody reads an answer
            return _error(400, "the client disconnected before the body ended", "body", {"Connection": "close"})
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            return _error(422, f"not valid JSON: {exc}", "body")
        try:
            budget, ids, rows = state.parse(body)
        except RequestError as exc:
            return _error(422, exc.message, exc.field)
        try:
            if len(ids) > INLINE_USERS:  # a batch: off the event loop, so /health and single users stay quick
                out = await run_in_threadpool(state.decide, budget, ids, rows)
            else:
                out = state.decide(budget, ids, rows)
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
