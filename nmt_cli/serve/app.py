"""The HTTP application of `nmt serve` (FastAPI): two translation APIs, health, models, a page.

- POST /translate: {"q": text or [texts], "beam": 5, "align": false} → {"translations": [...]},
  each with the keys of `nmt translate --json`; "alignment" and "attention" are filled, and the
  words with their word-level weights ("words") added, only when aligning.
- POST /translator/translate: OpenNMT-py's API, [{"src": text, "id": 100}] →
  [[{"src", "tgt", "pred_score", "n_best", "align"}]], so its clients work unchanged.
- GET /health, GET /models, and GET / (a page: translation and attention heatmap).

Handlers only check requests and wait: the translating happens in `nmt_cli.serve.worker`
(a process of its own under `nmt serve`).
Every error is a 4xx (or 5xx) with {"error": "one line"}.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from importlib import resources
from typing import TYPE_CHECKING

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from nmt_cli.errors import NmtError
from nmt_cli.render.heatmap import colour_scale
from nmt_cli.serve.requests import (
    Limits,
    RequestError,
    TranslateRequest,
    check_size,
    opennmt_request,
    parse_body,
    translate_request,
)
from nmt_cli.serve.worker import NMT_API, OPENNMT_API, STOPPED, WorkerStopped

if TYPE_CHECKING:
    from nmt_cli.serve.worker import Local, WorkerPool, WorkerProcess


_DISCONNECT_POLL_S = 0.2  # how often a waiting request checks that its client is still there
_BODY_S = 30.0  # a body of which nothing more comes for this long is refused (408): nor
# does a stalled upload keep a stopping server (SIGTERM) waiting without end


def _gone() -> JSONResponse:
    # nginx's 499 "client closed request": nobody reads it, but the access log says so
    return JSONResponse({"error": "the client closed the connection"}, status_code=499)


def create_app(
    translator: Local | WorkerProcess | WorkerPool, limits: Limits | None = None
) -> FastAPI:
    """The service over a started translator (`nmt_cli.serve.worker`); it closes with the app."""
    limits = limits or Limits()

    @contextlib.asynccontextmanager
    async def lifespan(_app):
        yield
        translator.close()  # after the server has drained its requests: finishes what is queued

    app = FastAPI(
        title="nmt",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        redirect_slashes=False,  # /translate/ is a 404 in JSON, not an empty 307 to follow
    )
    page = _page()

    @app.exception_handler(RequestError)
    async def refused(_request, exc: RequestError):
        return JSONResponse({"error": str(exc)}, status_code=exc.status)

    @app.exception_handler(HTTPException)
    async def http_error(_request, exc: HTTPException):
        # with its headers: a 405 names the methods the route allows (Allow)
        return JSONResponse(
            {"error": str(exc.detail)}, status_code=exc.status_code, headers=exc.headers
        )

    @app.exception_handler(NmtError)
    async def failed(_request, exc: NmtError):  # the search failed
        return JSONResponse({"error": _first_line(exc)}, status_code=500)

    @app.exception_handler(WorkerStopped)
    async def unavailable(_request, exc: WorkerStopped):  # its process stopped: as /health says
        return JSONResponse({"error": _first_line(exc)}, status_code=503)

    @app.exception_handler(ClientDisconnect)
    async def gone_while_sending(_request, _exc: ClientDisconnect):  # it left mid-body
        return _gone()

    @app.exception_handler(_Stopped)
    async def stopped(_request, _exc: _Stopped):  # a second Ctrl-C: the answer its client gets
        message = "the server stopped at once (a second Ctrl-C) before it answered this request"
        return JSONResponse({"error": message}, status_code=503)

    @app.exception_handler(Exception)
    async def crashed(_request, exc: Exception):  # a bug: the server log has the traceback
        message = f"translation failed: {type(exc).__name__}: {_first_line(exc)}"
        return JSONResponse({"error": message}, status_code=500)

    async def run(http: Request, request: TranslateRequest, api: str) -> list[dict] | None:
        """The request's records; None if its client went away first: then its lines not yet
        in a search are dropped (a client that times out and retries would pile up work)."""
        future = translator.submit(request, api)
        answer = asyncio.wrap_future(future)
        try:
            while not (await asyncio.wait({answer}, timeout=_DISCONNECT_POLL_S))[0]:
                if await http.is_disconnected():
                    future.cancel()
                    return None
        except asyncio.CancelledError:  # the server cancelled the request (a forced stop)
            future.cancel()
            raise _Stopped() from None
        return answer.result()

    @app.post("/translate")
    async def translate(request: Request):
        job = translate_request(parse_body(await _body(request, limits), limits), limits)
        first = translator.models[0] if translator.models else {}
        if job.align and first.get("attention") == "none":
            raise RequestError(
                f'"align": true needs attention, and {first["path"]} was trained with '
                '--attention none: send "align": false',
                422,
            )
        records = await run(request, job, NMT_API)
        return _gone() if records is None else JSONResponse({"translations": records})

    @app.post("/translator/translate")
    async def translate_opennmt(request: Request):
        job = opennmt_request(parse_body(await _body(request, limits), limits), limits)
        records = await run(request, job, OPENNMT_API)
        return _gone() if records is None else JSONResponse([records])

    # HEAD too on every GET route, as uptime monitors ask; /translator/health is the path of OpenNMT-py's server
    @app.api_route("/health", methods=["GET", "HEAD"])
    @app.api_route("/translator/health", methods=["GET", "HEAD"])
    async def health():
        if translator.healthy:
            return {"status": "ok"}
        return JSONResponse({"status": "stopped", "error": STOPPED}, status_code=503)

    @app.api_route("/models", methods=["GET", "HEAD"])
    async def list_models():
        return {"models": translator.models, "ensemble": len(translator.models) > 1}

    @app.api_route("/", methods=["GET", "HEAD"], response_class=HTMLResponse)
    async def index():
        return page

    return app


async def _body(request: Request, limits: Limits) -> bytes:
    """The body, refused unread when its declared length is over the limit, and refused as
    soon as more than the limit has come when it declares none (chunked)."""
    encoding = request.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise RequestError(
            f"Content-Encoding {encoding} is not supported: send the JSON uncompressed", 415
        )
    declared = request.headers.get("content-length", "")
    if declared.isdigit():
        check_size(int(declared), limits)
    chunks, size = [], 0
    stream = request.stream()
    try:
        while True:
            try:  # each part within _BODY_S of the last: a slow link may take its time
                chunk = await asyncio.wait_for(anext(stream), _BODY_S)
            except StopAsyncIteration:
                break
            size += len(chunk)
            check_size(size, limits)
            chunks.append(chunk)
    except TimeoutError:
        raise RequestError(
            f"the request body stalled: nothing of it came for {_BODY_S:g} s ({size:,} bytes "
            "came before): send it whole",
            408,
        ) from None
    except asyncio.CancelledError:  # a forced stop while the body was still coming
        raise _Stopped() from None
    return b"".join(chunks)


class _Stopped(Exception):
    """A request cancelled by the server's forced stop, answered 503 like every other error."""


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]


def _page() -> str:
    """The page at /, with the terminal heatmap's colour scale filled in."""
    html = resources.files("nmt_cli.serve").joinpath("page.html").read_text(encoding="utf-8")
    return html.replace("__PALETTE__", json.dumps(colour_scale()))
