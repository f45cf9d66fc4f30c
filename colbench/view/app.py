"""The live viewer: a Starlette app over a :class:`~colbench.view.site.Site`.

Safety first, since everything shown is untrusted (agent answers, human replies, task text): templates escape all
of it, agent HTML is never rendered (only screenshots and escaped source), every response carries a strict CSP with
no inline script, files are served only from inside the given run directories, and a server reachable from other
machines needs a token (the rule of ``colbench serve``).
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from pathlib import Path

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from colbench.errors import DataError
from colbench.runs import safe_relative
from colbench.view.index import SORTS
from colbench.view.site import PAGE_SIZE, STATIC, Links, Site

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Resource-Policy": "same-origin",
}
MAX_PAGE_SIZE = 500
TOKEN_COOKIE = "colbench_view_token"

Call = Callable[[Request], Awaitable[Response]]


class Guard(BaseHTTPMiddleware):
    """Security headers on every response; the token (header, cookie, or ``?token=`` once) when one is set."""

    def __init__(self, app: object, token: str | None) -> None:
        super().__init__(app)  # type: ignore[arg-type]
        self.token = token

    async def dispatch(self, request: Request, call_next: Call) -> Response:
        given = _given_token(request)
        if self.token is not None and not (given and hmac.compare_digest(given.encode(), self.token.encode())):
            response: Response = PlainTextResponse("a token is needed: open the URL with ?token=...", 401)
        else:
            response = await call_next(request)
            if self.token is not None and request.query_params.get("token"):
                response.set_cookie(TOKEN_COOKIE, self.token, httponly=True, samesite="strict")
        response.headers.update(HEADERS)
        return response


def _given_token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip()
    return request.query_params.get("token") or request.cookies.get(TOKEN_COOKIE)


def _int(request: Request, name: str, default: int, low: int = 0, high: int = 1 << 31) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise DataError(f"query parameter {name}: {raw[:40]!r} is not an integer") from None
    if not low <= value <= high:
        raise DataError(f"query parameter {name}: {value} is outside {low} to {high}")
    return value


def make_app(site: Site, *, token: str | None = None, hosts: list[str] | None = None) -> Starlette:
    """The viewer's app; ``token``: required of every request when set; ``hosts``: the only Host headers answered
    (a page on another site that rebinds its DNS name to 127.0.0.1 must not read the runs). The pages are plain
    functions: Starlette runs them in its thread pool, so reading an index or a log never holds up the event loop."""
    links = Links()

    def rid_of(request: Request) -> int:
        rid = int(request.path_params["rid"])
        site.index(rid)
        return rid

    def home(request: Request) -> Response:
        return HTMLResponse(site.render("runs.html", links, runs=site.runs_json(links)))

    def runs_api(request: Request) -> Response:
        return JSONResponse(site.runs_json(links))

    def run_page(request: Request) -> Response:
        return HTMLResponse(site.run_page(rid_of(request), links))

    def episodes_api(request: Request) -> Response:
        rid = rid_of(request)
        filters = tuple(f for f in request.query_params.getlist("filter") if f)
        sort = request.query_params.get("sort", "order")
        if sort not in SORTS:
            raise DataError(f"query parameter sort: {sort[:40]!r} is not one of {', '.join(SORTS)}")
        data = site.episodes_json(
            rid,
            links,
            page=_int(request, "page", 0),
            size=_int(request, "size", PAGE_SIZE, 1, MAX_PAGE_SIZE),
            filters=filters,
            search=request.query_params.get("q", "")[:500],
            sort=sort,
            descending=request.query_params.get("desc") == "1",
        )
        return JSONResponse(data)

    def episode_page(request: Request) -> Response:
        rid = rid_of(request)
        task = request.query_params.get("task")
        if not task:
            raise DataError("query parameter task: missing")
        trial = _int(request, "trial", 0)
        episode = site.episode(rid, task, trial)
        if episode is None:
            return PlainTextResponse(f"run {rid} has no episode ({task[:80]!r}, trial {trial})", 404)
        return HTMLResponse(site.render("episode.html", links, rid=rid, ep=episode))

    def run_file(request: Request) -> Response:
        rid = rid_of(request)
        run_dir = site.index(rid).run_dir
        name = str(request.path_params["name"])
        if not name.lower().endswith(".png") or not safe_relative(name, run_dir):
            return PlainTextResponse("not found", 404)
        return FileResponse(run_dir / name, media_type="image/png")

    def compare_page(request: Request) -> Response:
        a, b = int(request.path_params["a"]), int(request.path_params["b"])
        site.index(a), site.index(b)
        pair, error, changes = site.comparison(a, b)
        return HTMLResponse(site.render("compare.html", links, a=a, b=b, pair=pair, error=error, changes=changes))

    def no_icon(request: Request) -> Response:
        return Response(status_code=204)  # browsers ask for one: an answer, not a 404 in the console

    async def bad_request(request: Request, exc: Exception) -> Response:
        return PlainTextResponse(str(exc), 404 if str(exc).startswith("no run") else 400)

    routes = [
        Route("/", home),
        Route("/favicon.ico", no_icon),
        Route("/api/runs", runs_api),
        Route("/runs/{rid:int}", run_page),
        Route("/api/runs/{rid:int}/episodes", episodes_api),
        Route("/runs/{rid:int}/episode", episode_page),
        Route("/runs/{rid:int}/files/{name:path}", run_file),
        Route("/compare/{a:int}/{b:int}", compare_page),
        Mount("/static", StaticFiles(directory=Path(STATIC)), name="static"),
    ]
    return Starlette(
        routes=routes,
        middleware=[
            Middleware(Guard, token=token),
            *([Middleware(TrustedHostMiddleware, allowed_hosts=hosts)] if hosts else []),
        ],
        exception_handlers={DataError: bad_request},
    )
