"""Starting the server: where it may listen, its address, the browser, and uvicorn."""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
import threading
import webbrowser
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import quote

from ledger.collector import settle
from ledger.errors import UsageError

if TYPE_CHECKING:
    from ledger.usecases.ledger import Ledger

TOKEN_ENV = "LEDGER_SERVE_TOKEN"
LOCAL_NAMES = ("127.0.0.1", "localhost", "::1")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_binding(host: str, token: str | None) -> None:
    """Beyond the loopback anyone on the network could read the ledger: not without a token."""
    if not is_loopback(host) and not token:
        raise UsageError(
            f"serving on {host} lets anyone who reaches it read the ledger: give a token "
            f"(--token T or ${TOKEN_ENV}), or serve on 127.0.0.1"
        )


def listen(host: str, port: int) -> socket.socket:
    """A listening socket (port 0: one the system picks), or a one-line error."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def address(host: str, port: int, token: str | None) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/" + (f"?token={quote(token)}" if token else "")


def can_open_browser() -> bool:
    """A browser can show the page: a desktop session, or macOS or Windows."""
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def serve(
    lg: Ledger,
    *,
    host: str,
    port: int,
    token: str | None,
    open_browser: bool,
    say: Callable[[str], None],
) -> None:
    """Serve `lg` until Ctrl-C (or SIGTERM)."""
    import uvicorn

    from ledger.serve.app import build_app

    check_binding(host, token)
    hosts = list({host, *LOCAL_NAMES}) if is_loopback(host) else ["*"]
    app = build_app(lg, token=token, allowed_hosts=hosts)
    sock = listen(host, port)
    bound = sock.getsockname()[1]
    url = address(host, bound, token)
    say(f"ledger serve: {lg.location.display()} on {url} (Ctrl-C stops it)")
    if open_browser and can_open_browser():
        threading.Timer(0.5, webbrowser.open, args=(url,)).start()
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    settle()  # a server lives on: the collector as Python has it
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
