"""ledger: a debugging-session ledger and experiment tracker for throughput regressions.

    import ledger
    lg = ledger.open()                 # the same ledger the CLI finds
    lg.runs_frame()                    # pandas DataFrame of runs

Importing ledger is cheap: SQLAlchemy, pandas, matplotlib, alembic and torch are loaded
where they are used, so `ledger --help` starts fast.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ledger.errors import LedgerError

__version__ = "0.1.0"
__all__ = ["Ledger", "LedgerError", "__version__", "open"]

if TYPE_CHECKING:
    from ledger.usecases.ledger import Ledger


def open(
    db: str | os.PathLike[str] | None = None,
    *,
    create: bool = True,
    investigation: str | None = None,
) -> Ledger:
    """Open the ledger at `db` (a path or SQLAlchemy URL), or the one discovery finds.

    With `create=False` a missing ledger raises LedgerNotFoundError instead of being made.
    """
    from ledger.usecases.ledger import Ledger

    return Ledger.open(db, create=create, investigation=investigation)


def __getattr__(name: str) -> object:
    if name == "Ledger":
        from ledger.usecases.ledger import Ledger

        return Ledger
    raise AttributeError(f"module 'ledger' has no attribute {name!r}")
