"""The investigation in time order: what was thought, changed, shipped, run and seen."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ledger.db import models as m
from ledger.model import records
from ledger.model.terms import STORY_EVENT_KINDS
from ledger.store import deploys

# When two rows share a timestamp, the causal order: an idea precedes its patch, etc.
_ORDER = {
    kind: i
    for i, kind in enumerate(
        (
            "hypothesis",
            "patch",
            "run",
            "deploy",
            "log_file",
            "probe",
            "event",
            "comparison",
            "resolution",
        )
    )
}


def _short(text: str | None, width: int = 90) -> str:
    line = " ".join((text or "").split())
    return line if len(line) <= width else line[: width - 1] + "…"


def entries(session: Session, inv: int) -> list[records.TimelineEntry]:
    """Every row of the investigation in time order (causal order within a timestamp)."""
    found = [
        *_hypotheses(session, inv),
        *_patches(session, inv),
        *_runs(session, inv),
        *_deploys(session, inv),
        *_log_files(session, inv),
        *_probes(session, inv),
        *_events(session, inv),
        *_comparisons(session, inv),
    ]
    found.sort(key=lambda e: (e.when, _ORDER[e.kind], e.id))
    return found


def _entry(
    when: datetime, kind: str, id: int, run: str | None, summary: str
) -> records.TimelineEntry:
    return records.TimelineEntry(when=when, kind=kind, id=id, run=run, summary=summary)


def _hypotheses(session: Session, inv: int) -> list[records.TimelineEntry]:
    out = []
    for h in session.scalars(select(m.Hypothesis).where(m.Hypothesis.investigation_id == inv)):
        parent = f" (refines #{h.parent_id})" if h.parent_id else ""
        out.append(
            _entry(h.created_at, "hypothesis", h.id, None, f"#{h.id}{parent}: {_short(h.text)}")
        )
        if h.resolved_at is not None:
            note = f" — {_short(h.note, 60)}" if h.note else ""
            out.append(_entry(h.resolved_at, "resolution", h.id, None, f"#{h.id} {h.status}{note}"))
    return out


def _patches(session: Session, inv: int) -> list[records.TimelineEntry]:
    files = dict(
        session.execute(
            select(m.PatchFile.patch_id, func.count()).group_by(m.PatchFile.patch_id)
        ).all()
    )
    out = []
    query = select(m.Patch).join(m.Hypothesis).where(m.Hypothesis.investigation_id == inv)
    for p in session.scalars(query):
        extra = [f"{files.get(p.id, 0)} file(s)"]
        if p.git_commit:
            extra.append(f"commit {p.git_commit[:10]}")
        out.append(
            _entry(
                p.created_at,
                "patch",
                p.id,
                None,
                f"#{p.id} for hypothesis #{p.hypothesis_id}: {_short(p.summary, 70)}"
                f" ({', '.join(extra)})",
            )
        )
    return out


def _runs(session: Session, inv: int) -> list[records.TimelineEntry]:
    out = []
    for r in session.scalars(select(m.Run).where(m.Run.investigation_id == inv)):
        tests = f" to test patch #{r.patch_id}" if r.patch_id else ""
        out.append(_entry(r.created_at, "run", r.id, r.name, f"{r.name}{tests} (fate: {r.fate})"))
    return out


def _deploys(session: Session, inv: int) -> list[records.TimelineEntry]:
    out = []
    query = select(m.DeployStep, m.Run.name).join(m.Run).where(m.Run.investigation_id == inv)
    for d, run in session.execute(query):
        status = "running" if d.exit_code is None else f"exit {d.exit_code}"
        if deploys.was_held(d):
            status = "not run"
        if d.timed_out:
            status = "timed out"
        if d.recorded_only:
            status += ", recorded"
        drift = ""
        if d.drift:
            drift = f" — DRIFT: {d.artifact_path} is not what the patch recorded"
        elif d.drift is False:
            drift = f" — {d.artifact_path} matches the patch"
        out.append(
            _entry(
                d.started_at,
                "deploy",
                d.id,
                run,
                f"{run}/{d.name}: {_short(d.command, 60)} → {status}{drift}",
            )
        )
    return out


def _log_files(session: Session, inv: int) -> list[records.TimelineEntry]:
    out = []
    query = select(m.LogFile, m.Run.name).join(m.Run).where(m.Run.investigation_id == inv)
    for f, run in session.execute(query):
        out.append(
            _entry(
                f.ingested_at or f.created_at,
                "log_file",
                f.id,
                run,
                f"{run}: {f.path} ({f.lines} lines read)",
            )
        )
    return out


# The events that tell the story of a run; warnings and progress notes stay in `show`.
_STORY = STORY_EVENT_KINDS


def _events(session: Session, inv: int) -> list[records.TimelineEntry]:
    """One entry per run and kind of notable event: when it first appeared, and how often."""
    grouped = session.execute(
        select(m.LogEvent.run_id, m.LogEvent.kind, func.min(m.LogEvent.id), func.count())
        .join(m.Run, m.Run.id == m.LogEvent.run_id)
        .where(m.Run.investigation_id == inv, m.LogEvent.kind.in_(_STORY))
        .group_by(m.LogEvent.run_id, m.LogEvent.kind)
    ).all()
    if not grouped:
        return []
    firsts = {
        e.id: e
        for e in session.scalars(
            select(m.LogEvent).where(m.LogEvent.id.in_([g[2] for g in grouped]))
        )
    }
    names = dict(
        session.execute(select(m.Run.id, m.Run.name).where(m.Run.investigation_id == inv)).all()
    )
    out = []
    for run_id, kind, first_id, n in grouped:
        first = firsts[first_id]
        run = names.get(run_id, "?")
        times = f" ×{n}" if n > 1 else ""
        step = f" at step {first.step:,}" if first.step is not None else ""
        summary = f"{run}: {kind}{times}{step}: {_short(first.text, 70)}"
        out.append(_entry(first.created_at, "event", first.id, run, summary))
    return out


def _comparisons(session: Session, inv: int) -> list[records.TimelineEntry]:
    """The verdicts kept: compare --resolve, and watch's decisions."""
    names = dict(
        session.execute(select(m.Run.id, m.Run.name).where(m.Run.investigation_id == inv)).all()
    )
    out = []
    for c in session.scalars(select(m.Comparison).where(m.Comparison.investigation_id == inv)):
        run = names.get(c.run_b_id, "?")
        against = names.get(c.run_a_id, "?") if c.run_a_id is not None else "the baseline"
        at = f" at step {c.decided_at_step:,}" if c.decided_at_step is not None else ""
        said = f"{c.kind}: {run} {c.verdict} against {against}{at} — {_short(c.summary, 60)}"
        out.append(_entry(c.created_at, "comparison", c.id, run, said))
    return out


def _probes(session: Session, inv: int) -> list[records.TimelineEntry]:
    out = []
    query = select(m.Probe, m.Run.name).join(m.Run).where(m.Run.investigation_id == inv)
    for p, run in session.execute(query):
        said = p.conclusion or (f"fate {p.fate}" if p.fate else "")
        status = "timed out" if p.timed_out else f"exit {p.exit_code}"
        out.append(
            _entry(
                p.started_at,
                "probe",
                p.id,
                run,
                f"{run}: {status}{': ' + _short(said, 70) if said else ''}",
            )
        )
    return out
