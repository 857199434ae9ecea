"""The memory inspector's page (docs/inspector.md): static assets served by ``pmem serve`` at ``/ui``.

The page is plain JavaScript, CSS and SVG shipped in this package (``assets/``): nothing is fetched from
anywhere but the server itself, and the Content-Security-Policy says so to the browser. It reads the
memory only through the ``/v1`` API with the caller's bearer token (kept in the tab's
``sessionStorage``), so it can show nothing the token could not read with curl. Every path under
``/ui/`` answers the same page, which then draws the view its URL names (``/ui/?q=``,
``/ui/cell/KEY?as_of=N``, ``/ui/graph/KEY?as_of=N``, ``/ui/changes?since=N&until=M``); these routes
take no token and are left out of ``/openapi.json`` (they are not the API).
"""

from __future__ import annotations

from importlib import resources
from typing import Any

ASSETS = {"inspector.js": "text/javascript; charset=utf-8", "inspector.css": "text/css; charset=utf-8"}
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def asset(name: str) -> bytes:
    """One file of ``assets/`` (the page, its script or its style sheet)."""
    return resources.files(__name__).joinpath("assets", name).read_bytes()


def install(app: Any) -> None:
    """``/ui`` and everything under it on ``app``: the page, and its two assets."""
    from fastapi import Response
    from fastapi.responses import RedirectResponse

    page = asset("index.html")
    files = {name: asset(name) for name in ASSETS}

    async def index() -> Response:
        return Response(page, media_type="text/html; charset=utf-8", headers=HEADERS)

    async def bare() -> Response:
        return RedirectResponse("/ui/", status_code=308)

    async def static(name: str) -> Response:
        if name not in files:
            return Response(b"not found", status_code=404, media_type="text/plain", headers=HEADERS)
        return Response(files[name], media_type=ASSETS[name], headers=HEADERS)

    async def view(path: str) -> Response:
        return await index()

    app.add_api_route("/ui", bare, methods=["GET"], include_in_schema=False)
    app.add_api_route("/ui/assets/{name}", static, methods=["GET"], include_in_schema=False)
    app.add_api_route("/ui/{path:path}", view, methods=["GET"], include_in_schema=False)
