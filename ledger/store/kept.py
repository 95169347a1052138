"""Kept analyses (revision 0007): a launch's analysis, as compare last made it, with what
says whether its steps changed since.

Steps are only ever added (INSERT … ON CONFLICT DO NOTHING), except where a rewritten log's
rows are removed or empty values are filled in; those two writers bump
`launch.steps_rewritten`. So a launch whose step count and `steps_rewritten` are what they
were when an analysis read its steps still holds exactly those steps, and the analysis
stands. `steps_rewritten` is read before the steps; the count too where it was made (to
tell a kept analysis stale), else it is the rows the read returned. Either way a step
added in between makes the kept row look older than it is (it is not used), never newer.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from ledger.db import models as m
from ledger.db.types import utcnow
from ledger.store.steps import placeholder


@dataclass(frozen=True)
class Version:
    """What a launch's steps were when they were read: their count, and steps_rewritten."""

    steps: int
    rewritten: int


@dataclass(frozen=True)
class Entry:
    """One analysis to keep: the launch, the settings it was made with, the version of the
    steps it read, and the analysis as JSON (ledger.model.kept)."""

    run_id: int
    launch: int
    settings: str
    version: Version
    body: str


def version(session: Session, run_id: int, launch: int) -> Version:
    """The launch's step count (on the key's index) and its steps_rewritten."""
    conn = session.connection()
    mark = placeholder(conn.dialect.name)
    count = conn.exec_driver_sql(
        f"SELECT count(*) FROM step WHERE run_id = {mark} AND launch = {mark}", (run_id, launch)
    ).scalar_one()
    return Version(int(count), rewritten(session, run_id, launch))


def rewritten(session: Session, run_id: int, launch: int) -> int:
    """The launch's steps_rewritten."""
    found = session.scalar(
        select(m.Launch.steps_rewritten).where(m.Launch.run_id == run_id, m.Launch.number == launch)
    )
    return int(found or 0)


@dataclass(frozen=True)
class Found:
    """What `find` saw: the kept analysis that stands (None when none does), and the
    launch's version when it was counted to tell (None when no analysis was kept with
    these settings: nothing to tell, and a count walks every step's index entry)."""

    body: str | None
    now: Version | None


def find(session: Session, run_id: int, launch: int, settings: str) -> Found:
    """The analysis kept for the launch, made with `settings` over the steps it still has."""
    row = session.get(m.KeptAnalysis, (run_id, launch))
    if row is None or row.settings != settings:
        return Found(None, None)
    now = version(session, run_id, launch)
    if (row.steps, row.rewritten) != (now.steps, now.rewritten):
        return Found(None, now)
    return Found(row.body, now)


def keep(session: Session, entries: list[Entry]) -> None:
    """Keep each entry, replacing what its launch held (one analysis a launch)."""
    for e in entries:
        session.execute(
            delete(m.KeptAnalysis).where(
                m.KeptAnalysis.run_id == e.run_id, m.KeptAnalysis.launch == e.launch
            )
        )
        session.add(
            m.KeptAnalysis(
                run_id=e.run_id,
                launch=e.launch,
                settings=e.settings,
                steps=e.version.steps,
                rewritten=e.version.rewritten,
                body=e.body,
                made_at=utcnow(),
            )
        )
    session.flush()
