"""Data the report tests share: steps at a level, events and GPU samples written as rows.

No tests here; the other test_report_* files import these.
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

import numpy as np

MATH = "math_$\\frac{1}{$"  # mathtext that matplotlib cannot parse
RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE: mirrors what follows it
# SQLite keeps a name of any length; PostgreSQL refuses more than run.name's 200 characters
LONG_CHARS = 3000 if os.environ.get("LEDGER_TEST_BACKEND", "sqlite") == "sqlite" else 180
LONG = "attempt_" + "x" * LONG_CHARS + "_end"


def steps(
    level: float,
    n: int = 400,
    seed: int = 0,
    *,
    wall_from: float | None = None,
    loss: bool = False,
    memory_mib: float | None = None,
    noise: float = 0.01,
) -> list[dict[str, Any]]:
    """`n` steps around `level` with a 20-step warm-up from 30 % of it."""
    rng = np.random.default_rng(seed)
    values = level * (1 + rng.normal(0, noise, n))
    values[:20] *= np.linspace(0.3, 0.95, 20)
    rows = []
    for i, v in enumerate(values):
        row: dict[str, Any] = {"step": i + 1, "throughput": float(v), "step_time_s": 65536 / v}
        if wall_from is not None:
            row["wall_time"] = wall_from + 5.0 * i
        if loss:
            row["loss"] = 4.0 * np.exp(-i / 300) + 1.0
        if memory_mib is not None:
            row["memory_reserved_mib"] = memory_mib
        rows.append(row)
    return rows


def run_id(lg: Any, name: str) -> int:
    return int(lg.run_id(name))


def add_events(lg: Any, run: str, events: list[dict[str, Any]]) -> None:
    """log_event rows (kind, text, step, line, rank) for `run`, as an ingest would store them."""
    from sqlalchemy.orm import Session

    from ledger.db import models as m

    rid = run_id(lg, run)
    with Session(lg.engine) as session, session.begin():
        for e in events:
            session.add(m.LogEvent(run_id=rid, **e))


def add_probe_gpus(lg: Any, run: str, used_mib: list[float], total_mib: float | None) -> None:
    from sqlalchemy.orm import Session

    from ledger.db import models as m

    rid = run_id(lg, run)
    with Session(lg.engine) as session, session.begin():
        probe = m.Probe(run_id=rid, command="nvidia-smi", exit_code=0, fate="running")
        session.add(probe)
        session.flush()
        for i, used in enumerate(used_mib):
            session.add(
                m.GpuSample(
                    probe_id=probe.id, run_id=rid, gpu_index=i, name="NVIDIA H100 80GB HBM3",
                    memory_used_mib=used, memory_total_mib=total_mib, utilization_pct=90.0,
                )
            )  # fmt: skip


def set_run_times(lg: Any, run: str, **times: datetime) -> None:
    """Set run columns (created_at, started_at) directly, as an older ledger would have them."""
    from sqlalchemy import update
    from sqlalchemy.orm import Session

    from ledger.db import models as m

    with Session(lg.engine) as session, session.begin():
        session.execute(update(m.Run).where(m.Run.id == run_id(lg, run)).values(**times))


def set_deploy_time(lg: Any, run: str, when: datetime) -> None:
    from sqlalchemy import update
    from sqlalchemy.orm import Session

    from ledger.db import models as m

    with Session(lg.engine) as session, session.begin():
        session.execute(
            update(m.DeployStep)
            .where(m.DeployStep.run_id == run_id(lg, run))
            .values(started_at=when)
        )


def figure_texts(figure: Any, *, raw: bool = False) -> list[str]:
    """Every text a figure draws: titles, labels, tick labels, legends, annotations; the
    isolates around names (FSI … PDI) taken out unless `raw`."""
    from matplotlib.text import Text

    figure.canvas.draw()  # tick labels exist once drawn
    texts = [t.get_text() for t in figure.findobj(Text) if t.get_text()]
    return texts if raw else [t.replace("\u2068", "").replace("\u2069", "") for t in texts]
