"""The HTTP application of `nmt serve` (FastAPI): two translation APIs, health, models, a page.

- POST /translate: {"q": text or [texts], "beam": 5, "align": false} → {"translations": [...]},
  each the object `nmt translate --json` prints, with word weights ("words") when aligning.
- POST /translator/translate: OpenNMT-py's API, [{"src": text, "id": 100}] →
  [[{"src", "tgt", "pred_score", "n_best", "align"}]], so its clients work unchanged.
- GET /health, GET /models, and GET / (a page: translation and attention heatmap).

Handlers only check requests and wait: the translating happens in the `Batcher`'s thread.
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

from nmt_cli import checkpoint
from nmt_cli.aligner import translation_words
from nmt_cli.render.heatmap import colour_scale
from nmt_cli.render.translation import as_record, word_links
from nmt_cli.serve.batcher import Batcher
from nmt_cli.serve.requests import (
    Limits,
    RequestError,
    TranslateRequest,
    check_size,
    opennmt_request,
    parse_body,
    translate_request,
)

if TYPE_CHECKING:
    from nmt_cli.translator import Translation, Translator


def streams_of(translator: Translator):
    """The batcher's searches over `translator`: the search of `nmt translate` at each beam."""
    from nmt_cli.translator import SearchOptions

    def open_stream(beam: int, align: bool):
        return translator.stream(SearchOptions(beam_size=beam), with_attention=align)

    return open_stream


def create_app(
    translator: Translator, limits: Limits | None = None, window: float = 0.005, max_batch: int = 64
) -> FastAPI:
    """The service over a loaded translator; the batching worker runs while the app does."""
    limits = limits or Limits()
    batcher = Batcher(streams_of(translator), window, max_batch)

    @contextlib.asynccontextmanager
    async def lifespan(_app):
        batcher.start()
        yield
        batcher.close()  # after the server has drained its requests: finishes what is queued

    app = FastAPI(title="nmt", lifespan=lifespan, docs_url=None, redoc_url=None)
    page = _page()
    models = [_describe(t) for t in (translator, *translator.partners)]

    @app.exception_handler(RequestError)
    async def refused(_request, exc: RequestError):
        return JSONResponse({"error": str(exc)}, status_code=exc.status)

    @app.exception_handler(HTTPException)
    async def http_error(_request, exc: HTTPException):
        return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code)

    async def run(request: TranslateRequest) -> list[Translation]:
        return await asyncio.wrap_future(batcher.submit(request))

    @app.post("/translate")
    async def translate(request: Request):
        job = translate_request(parse_body(await _body(request, limits), limits), limits)
        results = await run(job)
        return JSONResponse({"translations": [_record(t, job.align) for t in results]})

    @app.post("/translator/translate")
    async def translate_opennmt(request: Request):
        job = opennmt_request(parse_body(await _body(request, limits), limits), limits)
        results = await run(job)
        return JSONResponse([[_opennmt_record(t) for t in results]])

    @app.get("/health")
    async def health():
        return {"status": "ok"}

    @app.get("/models")
    async def list_models():
        return {"models": models, "ensemble": len(models) > 1}

    @app.get("/", response_class=HTMLResponse)
    async def index():
        return page

    return app


async def _body(request: Request, limits: Limits) -> bytes:
    """The body, refused unread when its declared length is over the limit."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit():
        check_size(int(declared), limits)
    return await request.body()


def _record(translation: Translation, align: bool) -> dict:
    record = as_record(translation)
    words = translation_words(translation) if align else None
    if words is not None:  # word-level weights (T, S) and words: what the page draws
        weights = [[round(float(w), 4) for w in row] for row in words.weights]
        record["words"] = {"src": words.src_words, "tgt": words.tgt_words, "weights": weights}
    return record


def _opennmt_record(translation: Translation) -> dict:
    return {
        "src": translation.source,
        "tgt": translation.text,
        "pred_score": round(float(translation.score), 4),
        "n_best": 1,
        "align": [word_links(translation)],
    }


def _describe(translator: Translator) -> dict:
    meta_file = translator.model_dir / checkpoint.META_FILE
    meta = checkpoint.read_json(meta_file) if meta_file.is_file() else {}
    return {
        "path": str(translator.model_dir),
        "src_lang": meta.get("src_lang"),
        "tgt_lang": meta.get("tgt_lang"),
        "step": meta.get("step"),
        "attention": translator.config.model.attention,
        "src_vocab_size": translator.config.model.src_vocab_size,
        "tgt_vocab_size": translator.config.model.tgt_vocab_size,
    }


def _page() -> str:
    """The page at /, with the terminal heatmap's colour scale filled in."""
    html = resources.files("nmt_cli.serve").joinpath("page.html").read_text(encoding="utf-8")
    return html.replace("__PALETTE__", json.dumps(colour_scale()))
