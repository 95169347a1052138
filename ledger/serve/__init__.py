"""`ledger serve`: the live local UI, a thin web front end over the Ledger's public API.

Each JSON endpoint is one call of `ledger.Ledger` (or of its `live_reads()`), turned into
JSON by ledger.serve.views; the pages are static HTML and JavaScript (ledger/serve/static)
that fetch those endpoints and put every text from the ledger into the page as text. The
web stack (Starlette, uvicorn) is the optional extra `ledger[serve]`; nothing here is
imported by `import ledger` or `ledger --help`.
"""

from __future__ import annotations

SERVE_EXTRA_HINT = "pip install 'ledger[serve]'"


def require_web_stack() -> None:
    """Fail with one line naming the extra when Starlette or uvicorn is missing."""
    import importlib

    from ledger.errors import LedgerError

    missing = []
    for name in ("starlette", "uvicorn"):
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if missing:
        raise LedgerError(
            f"ledger serve needs {' and '.join(missing)}, which "
            f"{'is' if len(missing) == 1 else 'are'} not installed: "
            f"{SERVE_EXTRA_HINT}"
        )
