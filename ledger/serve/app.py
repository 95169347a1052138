"""The web application: three pages and the JSON endpoints behind them.

Every endpoint is one call of the Ledger's public API, shaped by ledger.serve.views. The
costly ones (the report's analysis, a run's analysis, `why`) are kept until the ledger's
version (LiveReads.version, a few index lookups) changes, so a page that polls every
second costs the database almost nothing while nothing is written.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from importlib import resources
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ledger.errors import LedgerError, NotFoundError, UsageError
from ledger.model.records import jsonable
from ledger.serve import views
from ledger.serve.guard import Guard

if TYPE_CHECKING:
    from ledger.usecases.ledger import Ledger

log = logging.getLogger("ledger.serve")
PAGES = ("investigation", "run", "compare")
KEPT_RESULTS = 256  # results kept across pages, runs and comparisons
MAX_COMPARED = 8  # runs one compare page overlays
DEFAULT_WIDTH = 1200  # chart buckets when the page does not say its width

ERROR_PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>ledger serve: error</title></head><body><h1>Something went wrong</h1>
<p>The server could not answer this request; what happened is in the terminal that runs
<code>ledger serve</code>.</p><p><a href="/">Back to the investigation</a></p></body></html>"""


class Versioned:
    """Results kept until the ledger's version changes; one computation per key at a time."""

    def __init__(self, version: Callable[[], str]) -> None:
        self._version = version
        self._kept: dict[tuple[Any, ...], tuple[str, Any]] = {}
        self._locks: dict[tuple[Any, ...], threading.Lock] = {}
        self._guard = threading.Lock()

    def get(self, key: tuple[Any, ...], compute: Callable[[], Any]) -> Any:
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            now = self._version()
            kept = self._kept.get(key)
            if kept is not None and kept[0] == now:
                return kept[1]
            value = compute()
            self._kept[key] = (now, value)
            if len(self._kept) > KEPT_RESULTS:  # the oldest first: dicts keep their order
                self._kept.pop(next(iter(self._kept)))
            return value


def build_app(lg: Ledger, *, token: str | None, allowed_hosts: list[str]) -> Starlette:
    """The application over the open (read-only) ledger `lg`."""
    live = lg.live_reads()
    kept = Versioned(live.version)

    def page(name: str) -> Callable[[Request], Response]:
        html = resources.files("ledger.serve").joinpath("static", f"{name}.html").read_text()

        def endpoint(_: Request) -> Response:
            return HTMLResponse(html)

        return endpoint

    def run_name(request: Request) -> str:
        name = request.query_params.get("run")
        if not name:
            raise UsageError("which run? (?run=NAME)")
        return name

    def version(_: Request) -> Response:
        return JSONResponse({"version": live.version()})

    def investigation(_: Request) -> Response:
        return _json(kept.get(("investigation",), lambda: views.investigation(lg.report_data())))

    def runs(_: Request) -> Response:
        return _json(kept.get(("runs",), lambda: [r.to_dict() for r in lg.runs()]))

    def run_names(_: Request) -> Response:
        return _json(kept.get(("names",), lg.run_names))

    def run_detail(request: Request) -> Response:
        name = run_name(request)
        return _json(kept.get(("show", name), lambda: views.run_detail(lg.show(name))))

    def baseline(_: Request) -> Response:
        return _json(kept.get(("baseline",), lambda: lg.baseline().to_dict()))

    def run_analysis(request: Request) -> Response:
        name = run_name(request)
        found = kept.get(("analysis", name), lambda: _or_reason(name, lg.analyze, views.analysis))
        return _json(found)

    def run_series(request: Request) -> Response:
        q = request.query_params
        width = _int(q.get("width")) or DEFAULT_WIDTH
        found = live.downsampled(
            run_name(request), width, first=_int(q.get("from")), last=_int(q.get("to"))
        )
        return JSONResponse(views.series(found))

    def run_gpu(request: Request) -> Response:
        name = run_name(request)
        return _json(
            kept.get(("gpu", name), lambda: [g.to_dict() for g in live.gpu_readings(name)])
        )

    def run_events(request: Request) -> Response:
        name = run_name(request)
        return _json(kept.get(("events", name), lambda: lg.log_events(name)))

    def run_why(request: Request) -> Response:
        name = run_name(request)
        return _json(kept.get(("why", name), lambda: _or_reason(name, lg.why, _to_dict)))

    def run_config(request: Request) -> Response:
        against = request.query_params.get("against") or None
        return _json(live.configuration(run_name(request), against).to_dict())

    def run_decisions(request: Request) -> Response:
        name = run_name(request)
        return _json(kept.get(("decisions", name), lambda: views.decisions(lg.comparisons(), name)))

    def compare(request: Request) -> Response:
        names = [n for n in request.query_params.get("runs", "").split(",") if n]
        if not 1 <= len(names) <= MAX_COMPARED:
            raise UsageError(f"compare takes 1 to {MAX_COMPARED} runs (?runs=a,b)")
        key = ("compare", *names)
        return _json(kept.get(key, lambda: views.compare(lg.compare(names))))

    routes = [
        Route("/", page("investigation")),
        Route("/run", page("run")),
        Route("/compare", page("compare")),
        Route("/favicon.ico", lambda _: Response(status_code=204)),
        Route("/api/version", version),
        Route("/api/investigation", investigation),
        Route("/api/runs", runs),
        Route("/api/baseline", baseline),
        Route("/api/run-names", run_names),
        Route("/api/run", run_detail),
        Route("/api/run/analysis", run_analysis),
        Route("/api/run/series", run_series),
        Route("/api/run/gpu", run_gpu),
        Route("/api/run/events", run_events),
        Route("/api/run/why", run_why),
        Route("/api/run/config", run_config),
        Route("/api/run/decisions", run_decisions),
        Route("/api/compare", compare),
        Mount("/static", StaticFiles(packages=[("ledger.serve", "static")]), name="static"),
    ]
    app = Starlette(
        routes=routes,
        exception_handlers={
            LedgerError: _ledger_error,
            HTTPException: _http_error,
            Exception: _server_error,
        },
    )
    app.add_middleware(Guard, token=token, allowed_hosts=allowed_hosts)
    return app


def _or_reason(run: str, call: Callable[[str], Any], shape: Callable[[Any], Any]) -> Any:
    """`shape(call(run))`, or why it cannot be had yet (too few steps, no throughput): a
    live run starts with none, which is no error of the request."""
    try:
        return shape(call(run))
    except NotFoundError:
        raise
    except LedgerError as exc:
        return {"not_analysed": str(exc), "error": str(exc)}


def _to_dict(record: Any) -> Any:
    return record.to_dict()


def _json(value: Any) -> Response:
    return JSONResponse(jsonable(value))


def _int(text: str | None) -> int | None:
    if text is None or text == "":
        return None
    try:
        return int(float(text))
    except ValueError:
        raise UsageError(f"not a number: {text[:40]!r}") from None


def _wants_json(request: Request) -> bool:
    return request.url.path.startswith("/api/")


async def _ledger_error(request: Request, exc: Exception) -> Response:
    """A run that does not exist, a bad parameter: said in words (they are the ledger's own
    one-line messages, shown as text by the page), never a traceback."""
    status = 404 if isinstance(exc, NotFoundError) else 400
    if _wants_json(request):
        return JSONResponse({"error": str(exc)}, status_code=status)
    return HTMLResponse(ERROR_PAGE, status_code=status)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if _wants_json(request):
        return JSONResponse({"error": exc.detail}, status_code=exc.status_code)
    return Response(exc.detail, status_code=exc.status_code, media_type="text/plain")


async def _server_error(request: Request, exc: Exception) -> Response:
    """A bug: logged with its traceback to the terminal; the page gets a generic answer."""
    log.error("error answering %s", request.url.path, exc_info=exc)
    if _wants_json(request):
        return JSONResponse({"error": "internal error (see the server's terminal)"}, 500)
    return HTMLResponse(ERROR_PAGE, status_code=500)
