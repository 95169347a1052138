"""MLflow tracking stores, read by MLflow's documented layouts: a SQLite store
(`mlflow.db`: the runs, metrics, params and tags tables) opened read-only, and a file store
(`mlruns/<experiment>/<run>/` with meta.yaml, metrics/, params/ and tags/). Neither needs
MLflow installed. Each MLflow run (deleted ones aside) is a run, named by its run name;
metrics by key and step (MLflow's timestamp, in ms, as the wall time), params into the
run's configuration. A value logged twice at one step keeps the latest. What cannot be
read as MLflow writes it (a text metric value, a line of a metric file that is not three
numbers, bytes that are not UTF-8) is skipped, counted and named in the run's skips.
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
    """The file read-only; text that is not UTF-8 arrives with its bytes escaped (as
    surrogates, see `undecodable`), not as an error that would stop the whole read."""
    conn = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True)
    conn.text_factory = lambda raw: raw.decode("utf-8", "surrogateescape")
    return conn


def undecodable(text: str) -> bool:
    """Whether `text` carries bytes that were not UTF-8 (escaped as lone surrogates)."""
    return any("\udc80" <= ch <= "\udcff" for ch in text)


def number(value: object) -> float | None:
    """A stored metric value as a float; None for text or blobs that are not numbers."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str) and not undecodable(value):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def step_number(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    parsed = number(value)
    return int(parsed) if parsed is not None and parsed.is_integer() else None


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
                value_ = math.nan if is_nan else number(value)
                step_ = step_number(step)
                if undecodable(str(key)):
                    run.skip("metrics whose key is not UTF-8", f"{key!r}"[:60])
                elif value_ is None or step_ is None:
                    run.skip("metric values that are not numbers", f"{key}@{step} {value!r}"[:60])
                else:
                    run.add(str(key), step_, value_, _seconds(stamp))
            params = conn.execute("SELECT key, value FROM params WHERE run_uuid = ?", (run_id,))
            for k, v in params:
                if undecodable(str(k)) or undecodable(str(v)):
                    run.skip("params that are not UTF-8", f"{k!r}"[:60])
                else:
                    run.config[str(k)] = str(v)
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
        run = TrackedRun(name=folder.name, source=SOURCE, origin="")
        meta = _meta(folder / "meta.yaml", run)
        if meta.get("lifecycle_stage") == "deleted":
            continue
        run_id = meta.get("run_id") or folder.name
        name = _text(folder / "tags" / "mlflow.runName", run) or meta.get("run_name") or run_id
        run.name, run.origin = name, f"{root.resolve()}#{run_id}"
        for file in sorted(p for p in (folder / "metrics").rglob("*") if p.is_file()):
            run.size += file.stat().st_size
            _metric_file(run, file, file.relative_to(folder / "metrics").as_posix())
        params = folder / "params"
        if params.is_dir():
            for p in sorted(params.rglob("*")):
                value = _text(p, run) if p.is_file() else None
                if value is not None:
                    run.config[p.relative_to(params).as_posix()] = value
        status = str(meta.get("status", ""))
        _fate(run, STATUS_NUMBERS.get(status, status))
        found.append(run)
    return found


def _metric_file(run: TrackedRun, file: Path, key: str) -> None:
    """`timestamp value step` lines (MLflow's file store); others skipped, counted, named."""
    for n, raw in enumerate(file.read_bytes().splitlines(), 1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            run.skip("metric lines that are not UTF-8", f"{key}:{n}")
            continue
        parts = line.split()
        if not parts:
            continue
        stamp = step_number(parts[0])
        value = number(parts[1]) if len(parts) > 1 else None
        step = step_number(parts[2]) if len(parts) > 2 else 0
        if stamp is None or value is None or step is None:
            run.skip("metric lines that are not numbers", f"{key}:{n} {line[:30]!r}")
            continue
        run.add(key, step, value, _seconds(stamp))


def _meta(path: Path, run: TrackedRun) -> dict[str, str]:
    """The top-level `key: value` lines of a run's meta.yaml (flat, as MLflow writes it)."""
    text = _text(path, run)
    meta = {}
    for line in (text or "").splitlines():
        if line[:1].isspace() or ":" not in line:
            continue
        key, _, value = line.partition(":")
        meta[key.strip()] = value.strip().strip("'\"")
    return meta


def _text(path: Path, run: TrackedRun) -> str | None:
    """A file's text; None when missing, or not UTF-8 (then counted as a skip)."""
    try:
        return path.read_bytes().decode("utf-8").strip()
    except OSError:
        return None
    except UnicodeDecodeError:
        run.skip("files that are not UTF-8", f"{path.parent.name}/{path.name}")
        return None


def _seconds(stamp: object) -> float | None:
    return float(stamp) / 1000.0 if isinstance(stamp, int | float) else None


def _fate(run: TrackedRun, status: str) -> None:
    fate = FATES.get(status.upper())
    if fate is not None:
        run.fate = fate
        run.fate_reason = f"MLflow status {status.upper()}"
