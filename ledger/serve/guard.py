"""Who may read the ledger through the server, and what the browser may do with the pages.

- A token, when the server has one (bound beyond the loopback it must): sent as
  `Authorization: Bearer T`, or as `?token=T` once (the answer then sets a cookie, so the
  page's own requests carry it). Anything else gets 401.
- The Host header must name the address the server was bound to (or localhost): a page
  of another site that rebinds its DNS name to 127.0.0.1 cannot read the ledger.
- Every answer forbids scripts, styles and connections from any other origin (the pages
  need none) and framing by another site.
"""

from __future__ import annotations

import hmac
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Message, Receive, Scope, Send

COOKIE = "ledger_serve_token"
SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        b"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]
# Data is never cached (a page must see the ledger as it is now); the static files, which
# change only with ledger itself, for ten minutes.
NO_STORE = (b"cache-control", b"no-store")
STATIC_CACHE = (b"cache-control", b"private, max-age=600")


class Guard:
    """ASGI middleware: the token, the Host check and the security headers above."""

    def __init__(self, app: ASGIApp, *, token: str | None, allowed_hosts: list[str]) -> None:
        self.app = app
        self.token = token
        self.allowed_hosts = {h.lower() for h in allowed_hosts}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        any_host = "*" in self.allowed_hosts  # bound beyond the loopback: the token guards
        if not any_host and _host_name(headers.get("host", "")) not in self.allowed_hosts:
            await _plain(send, 400, "unknown Host: open the address ledger serve printed")
            return
        from_query = False
        if self.token is not None:
            given, from_query = _presented(scope, headers)
            if given is None or not hmac.compare_digest(given.encode(), self.token.encode()):
                await _plain(send, 401, "a token is needed: open the address ledger serve printed")
                return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                static = scope.get("path", "").startswith("/static/")
                extra = [*SECURITY_HEADERS, STATIC_CACHE if static else NO_STORE]
                if from_query and self.token is not None:
                    cookie = f"{COOKIE}={self.token}; HttpOnly; SameSite=Strict; Path=/"
                    extra.append((b"set-cookie", cookie.encode("latin-1")))
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _presented(scope: Scope, headers: dict[str, str]) -> tuple[str | None, bool]:
    """The token the request carries (header, then ?token=, then the cookie), and whether
    it came in the query string."""
    auth = headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip(), False
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    if query.get("token"):
        return query["token"][0], True
    cookies: SimpleCookie = SimpleCookie()
    try:
        cookies.load(headers.get("cookie", ""))
    except Exception:  # a malformed Cookie header is no token: 401, like none at all
        return None, False
    morsel = cookies.get(COOKIE)
    return (morsel.value if morsel is not None else None), False


def _host_name(host: str) -> str:
    """'127.0.0.1:8765' → '127.0.0.1', '[::1]:8765' → '::1'."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].split("]")[0]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


async def _plain(send: Send, status: int, text: str) -> None:
    body = text.encode()
    headers: list[Any] = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        *SECURITY_HEADERS,
        NO_STORE,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
