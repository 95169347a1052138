"""Reading other trackers' runs into plain records (ledger.model.imports.TrackedRun).

    from ledger.importers import read
    runs = read(Path("runs/"))        # what the path is, recognised by its content

One module per format: `tensorboard` (event files, TensorBoard's reader), `mlflow` (a SQLite
store or an mlruns/ file store, by MLflow's layout), `trackio` (a project's SQLite file),
`wandb` (an offline run through wandb's reader; an exported history). The libraries are
optional extras, imported when a file needs them; ledger.store.imports writes the runs.
Every run read gets its rank from its name and its scalars' (`ranks`).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ledger.errors import BadContentError, InputFileError
from ledger.importers import mlflow, ranks, tensorboard, trackio, wandb
from ledger.importers.trackio import SQLITE_HEADER
from ledger.model.imports import TrackedRun

__all__ = ["read", "what"]


def what(path: Path) -> str:
    """Which format `path` holds: tensorboard, mlflow, mlflow-files, trackio,
    trackio-folder, wandb, wandb-export; BadContentError when none."""
    if not path.exists():
        raise InputFileError(f"{path}: no such file or folder")
    if path.is_file():
        if tensorboard.is_event_file(path):
            return "tensorboard"
        if path.suffix == wandb.RUN_SUFFIX:
            return "wandb"
        if _is_sqlite(path):
            return _sqlite_kind(path)
        if wandb.is_export(path):
            return "wandb-export"
    elif path.is_dir():
        if mlflow.is_file_store(path):
            return "mlflow-files"
        if wandb.run_files(path):
            return "wandb"
        if tensorboard.event_folders(path):
            return "tensorboard"
        if trackio.projects(path):
            return "trackio-folder"
    raise BadContentError(
        f"{path} is none of what ledger imports: TensorBoard event files, an MLflow store "
        "(mlflow.db or mlruns/), a trackio project (.db) or trackio's folder of them, "
        "a W&B offline run or an exported W&B history (CSV or JSON lines with _step)"
    )


def read(path: Path) -> list[TrackedRun]:
    """Every run `path` holds, in the order the tracker keeps them, each with its rank."""
    found = _read(path, what(path))
    for run in found:
        ranks.assign(run)
    return found


def _read(path: Path, kind: str) -> list[TrackedRun]:
    if kind == "tensorboard":
        return [tensorboard.read(folder, path) for folder in tensorboard.event_folders(path)]
    if kind == "mlflow":
        return mlflow.read_sqlite(path)
    if kind == "mlflow-files":
        return mlflow.read_file_store(path)
    if kind == "trackio":
        return trackio.read(path)
    if kind == "trackio-folder":
        return [run for project in trackio.projects(path) for run in trackio.read(project)]
    if kind == "wandb":
        return [wandb.read_offline(file) for file in wandb.run_files(path)]
    return [wandb.read_export(path)]


def _is_sqlite(path: Path) -> bool:
    with path.open("rb") as handle:
        return handle.read(len(SQLITE_HEADER)) == SQLITE_HEADER


def _sqlite_kind(path: Path) -> str:
    try:
        conn = mlflow.open_readonly(path)
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
            if mlflow.is_store(tables):
                return "mlflow"
            if trackio.is_project(tables, conn):
                return "trackio"
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise BadContentError(f"{path}: cannot read this SQLite file ({exc})") from exc
    raise BadContentError(
        f"{path} is a SQLite file but neither an MLflow store nor a trackio project"
    )
