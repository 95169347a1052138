"""trackio projects: the project's SQLite file (`<project>.db` under trackio's folder),
opened read-only: each run, its metrics (one JSON object per logged step) and its config.
trackio itself need not be installed.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime
from pathlib import Path
from typing import Any

from ledger.errors import BadContentError
from ledger.importers.mlflow import open_readonly
from ledger.model.imports import TrackedRun

SOURCE = "trackio"


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
            wall = _seconds(stamp)
            for metric, value in _object(blob).items():
                if isinstance(value, int | float) and not isinstance(value, bool):
                    run.add(str(metric), int(step), float(value), wall)
        config_columns = {row[1] for row in conn.execute("PRAGMA table_info(configs)")}
        config_ident = "run_id" if "run_id" in config_columns else "run_name"
        for key, blob in conn.execute(f"SELECT {config_ident}, config FROM configs"):
            if key in runs:
                runs[key].config = {
                    str(k): _config_text(v)
                    for k, v in _object(blob).items()
                    if not str(k).startswith("_") and v is not None
                }
        size = path.stat().st_size
        for run in runs.values():
            run.size = size
        return list(runs.values())
    except sqlite3.DatabaseError as exc:
        raise BadContentError(f"{path}: cannot read it as a trackio project ({exc})") from exc
    finally:
        conn.close()


def _object(blob: Any) -> dict[str, Any]:
    try:
        data = json.loads(blob)
    except (TypeError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _config_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _seconds(stamp: Any) -> float | None:
    try:
        return datetime.fromisoformat(str(stamp)).timestamp()
    except ValueError:
        return None
