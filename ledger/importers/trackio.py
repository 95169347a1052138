"""trackio projects: the project's SQLite file (`<project>.db` under trackio's folder,
`~/.cache/huggingface/trackio/` or $TRACKIO_DIR), opened read-only: each run, its metrics
(one JSON object per logged step) and its config; trackio's folder itself holds one such
file per project. trackio itself need not be installed.

trackio records nothing when a run ends (`trackio.finish()` flushes and stops): a run is
finished when its last step reaches the total its config announced (ledger.importers.
endings), else its fate is not known. A run per rank (`eager-rank1`, or `rank1` in the
group `eager`) is rank 1 of run `eager` (ledger.importers.ranks).
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime
from pathlib import Path
from typing import Any

from ledger.errors import BadContentError
from ledger.importers import endings
from ledger.importers.mlflow import open_readonly, step_number, undecodable
from ledger.model.imports import TrackedRun

SOURCE = "trackio"
SQLITE_HEADER = b"SQLite format 3\x00"
GROUP_KEY = "_Group"  # where trackio keeps a run's group in its config


def is_project(tables: set[str], conn: sqlite3.Connection) -> bool:
    if "metrics" not in tables or "configs" not in tables:
        return False
    columns = {row[1] for row in conn.execute("PRAGMA table_info(metrics)")}
    return {"run_name", "step", "metrics"} <= columns


def read(path: Path) -> list[TrackedRun]:
    conn = open_readonly(path)
    try:
        columns = {row[1] for row in conn.execute("PRAGMA table_info(metrics)")}
        ident = "run_id" if "run_id" in columns else "run_name"
        runs: dict[str, TrackedRun] = {}
        rows = conn.execute(
            f"SELECT {ident}, run_name, step, timestamp, metrics FROM metrics ORDER BY id"
        )
        for key, name, step, stamp, blob in rows:
            run = runs.get(key)
            if run is None:
                origin = f"{path.resolve()}#{key}"
                run = runs[key] = TrackedRun(name=str(name), source=SOURCE, origin=origin)
            step_ = step_number(step)
            values = _object(blob)
            if step_ is None or values is None:
                run.skip("rows that are not a step and a JSON object", f"{step!r} {blob!r}"[:60])
                continue
            wall = _seconds(stamp)
            for metric, value in values.items():
                if isinstance(value, int | float) and not isinstance(value, bool):
                    run.add(str(metric), step_, float(value), wall)
        config_columns = {row[1] for row in conn.execute("PRAGMA table_info(configs)")}
        config_ident = "run_id" if "run_id" in config_columns else "run_name"
        for key, blob in conn.execute(f"SELECT {config_ident}, config FROM configs"):
            if key not in runs:
                continue
            told = _object(blob)
            if told is None:
                runs[key].skip("configs that are not JSON", f"{blob!r}"[:60])
                continue
            group = told.get(GROUP_KEY)
            runs[key].group = str(group) if group else None
            runs[key].config = {
                str(k): _config_text(v)
                for k, v in told.items()
                if not str(k).startswith("_") and v is not None
            }
        size = path.stat().st_size
        for run in runs.values():
            run.size = size
            endings.finished_by_total(run, "trackio")
        return list(runs.values())
    except sqlite3.DatabaseError as exc:
        raise BadContentError(f"{path}: cannot read it as a trackio project ({exc})") from exc
    finally:
        conn.close()


def _object(blob: Any) -> dict[str, Any] | None:
    """A JSON object; None when `blob` is not one (damaged, or bytes that are not UTF-8)."""
    if isinstance(blob, str) and undecodable(blob):
        return None
    try:
        data = json.loads(blob)
    except (TypeError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _config_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _seconds(stamp: Any) -> float | None:
    try:
        return datetime.fromisoformat(str(stamp)).timestamp()
    except ValueError:
        return None


def projects(folder: Path) -> list[Path]:
    """The trackio projects in trackio's own folder: its `*.db` files that are projects."""
    if not folder.is_dir():
        return []
    found = []
    for file in sorted(p for p in folder.glob("*.db") if p.is_file()):
        with file.open("rb") as handle:
            if handle.read(len(SQLITE_HEADER)) != SQLITE_HEADER:
                continue  # not a SQLite file: not a project
        try:
            conn = open_readonly(file)
            try:
                tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
                if is_project(tables, conn):
                    found.append(file)
            finally:
                conn.close()
        except sqlite3.DatabaseError:
            found.append(file)  # a damaged SQLite file: reading it says so, in one line
    return found
