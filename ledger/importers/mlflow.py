"""MLflow tracking stores, read by MLflow's documented layouts: a SQLite store
(`mlflow.db`: the runs, metrics, params and tags tables) opened read-only, and a file store
(`mlruns/<experiment>/<run>/` with meta.yaml, metrics/, params/ and tags/). Neither needs
MLflow installed. Each MLflow run (deleted ones aside) is a run, named by its run name;
metrics by key and step (MLflow's timestamp, in ms, as the wall time), params into the
run's configuration. A value logged twice at one step keeps the latest.
"""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

from ledger.errors import BadContentError
from ledger.model.imports import TrackedRun
from ledger.model.terms import Fate

SOURCE = "mlflow"
STORE_TABLES = frozenset({"runs", "metrics", "params", "tags", "experiments"})
# MLflow's RunStatus, by name (SQLite store) and by number (file store's meta.yaml)
FATES = {
    "RUNNING": Fate.RUNNING,
    "SCHEDULED": Fate.LOADING,
    "FINISHED": Fate.FINISHED,
    "FAILED": Fate.CRASHED,
    "KILLED": Fate.KILLED,
}
STATUS_NUMBERS = {"1": "RUNNING", "2": "SCHEDULED", "3": "FINISHED", "4": "FAILED", "5": "KILLED"}


def open_readonly(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True)


def is_store(tables: set[str]) -> bool:
    return tables >= STORE_TABLES


def read_sqlite(path: Path) -> list[TrackedRun]:
    """Every live run of a SQLite tracking store."""
    conn = open_readonly(path)
    try:
        runs = conn.execute(
            "SELECT run_uuid, name, status FROM runs "
            "WHERE lifecycle_stage IS NULL OR lifecycle_stage != 'deleted' "
            "ORDER BY start_time, run_uuid"
        ).fetchall()
        found = []
        for run_id, name, status in runs:
            run = TrackedRun(
                name=str(name or run_id), source=SOURCE, origin=f"{path.resolve()}#{run_id}"
            )
            metrics = conn.execute(
                "SELECT key, step, value, timestamp, is_nan FROM metrics WHERE run_uuid = ? "
                "ORDER BY key, step, timestamp",
                (run_id,),
            )
            for key, step, value, stamp, is_nan in metrics:
                number = math.nan if is_nan else float(value)
                run.add(str(key), int(step), number, _seconds(stamp))
            params = conn.execute("SELECT key, value FROM params WHERE run_uuid = ?", (run_id,))
            run.config = {str(k): str(v) for k, v in params}
            _fate(run, str(status or ""))
            run.size = path.stat().st_size
            found.append(run)
        return found
    except sqlite3.DatabaseError as exc:
        raise BadContentError(f"{path}: cannot read it as an MLflow store ({exc})") from exc
    finally:
        conn.close()


def is_file_store(path: Path) -> bool:
    """mlruns/: experiment folders holding a meta.yaml, and run folders below them."""
    return path.is_dir() and any(True for _ in _run_folders(path))


def _run_folders(root: Path) -> list[Path]:
    found = []
    for experiment in sorted(root.iterdir()) if root.is_dir() else []:
        if not experiment.is_dir() or experiment.name.startswith("."):
            continue
        if not (experiment / "meta.yaml").is_file():
            continue
        for run in sorted(experiment.iterdir()):
            if (run / "meta.yaml").is_file() and (run / "metrics").is_dir():
                found.append(run)
    return found


def read_file_store(root: Path) -> list[TrackedRun]:
    """Every live run of a file store (mlruns/)."""
    found = []
    for folder in _run_folders(root):
        meta = _meta(folder / "meta.yaml")
        if meta.get("lifecycle_stage") == "deleted":
            continue
        run_id = meta.get("run_id") or folder.name
        name = _text(folder / "tags" / "mlflow.runName") or meta.get("run_name") or run_id
        run = TrackedRun(name=name, source=SOURCE, origin=f"{root.resolve()}#{run_id}")
        for file in sorted(p for p in (folder / "metrics").rglob("*") if p.is_file()):
            run.size += file.stat().st_size
            key = file.relative_to(folder / "metrics").as_posix()
            for line in file.read_text(encoding="utf-8").splitlines():
                parts = line.split()
                if len(parts) < 2:
                    continue
                stamp, value = parts[0], parts[1]
                step = parts[2] if len(parts) > 2 else "0"
                run.add(key, int(step), float(value), _seconds(int(stamp)))
        params = folder / "params"
        if params.is_dir():
            run.config = {
                p.relative_to(params).as_posix(): _text(p)
                for p in sorted(params.rglob("*"))
                if p.is_file()
            }
        status = str(meta.get("status", ""))
        _fate(run, STATUS_NUMBERS.get(status, status))
        found.append(run)
    return found


def _meta(path: Path) -> dict[str, str]:
    """The top-level `key: value` lines of a run's meta.yaml (flat, as MLflow writes it)."""
    meta = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line[:1].isspace() or ":" not in line:
            continue
        key, _, value = line.partition(":")
        meta[key.strip()] = value.strip().strip("'\"")
    return meta


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError:
        return ""


def _seconds(stamp: object) -> float | None:
    return float(stamp) / 1000.0 if isinstance(stamp, int | float) else None


def _fate(run: TrackedRun, status: str) -> None:
    fate = FATES.get(status.upper())
    if fate is not None:
        run.fate = fate
        run.fate_reason = f"MLflow status {status.upper()}"
