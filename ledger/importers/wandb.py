"""Weights & Biases: an offline run folder (`wandb/offline-run-*/run-<id>.wandb`), read by
wandb's own reader of its transaction log (the `[wandb]` extra: `wandb-core leet inspect
--json`, which prints each record as JSON), and an exported history (CSV, or JSON lines,
with a `_step` column), needing nothing. Scalars by name and `_step`, `_timestamp` as the
wall time; the run's config (an export's from a `config.json` beside it, W&B's
`{"key": {"value": …}}` form or a plain mapping).
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ledger.errors import BadContentError, MissingExtraError
from ledger.model.imports import TrackedRun
from ledger.model.terms import Fate

SOURCE = "wandb"
RUN_SUFFIX = ".wandb"
EXPORT_SUFFIXES = (".csv", ".jsonl", ".json", ".ndjson")
INTERNAL = ("_step", "_timestamp", "_runtime")
READ_TIMEOUT_S = 600.0


def run_files(path: Path) -> list[Path]:
    """The .wandb files of a run folder, a wandb/ folder of them, or the file itself."""
    if path.is_file():
        return [path] if path.suffix == RUN_SUFFIX else []
    if not path.is_dir():
        return []
    own = sorted(path.glob("run-*" + RUN_SUFFIX))
    if own:
        return own
    return sorted(path.glob("*-run-*/run-*" + RUN_SUFFIX))


def _core() -> str:
    try:
        from wandb.util import get_core_path
    except ImportError:
        raise MissingExtraError("W&B offline runs", "wandb", "wandb") from None
    return str(get_core_path())


def records(file: Path) -> Iterator[dict[str, Any]]:
    """The records of a .wandb transaction log, as wandb's reader prints them."""
    command = [_core(), "leet", "inspect", "--no-observability", "--json"]
    command += ["--run-file", str(file), str(file.parent.parent)]
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    try:
        done = subprocess.run(
            command, capture_output=True, check=False, timeout=READ_TIMEOUT_S, env=env
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BadContentError(f"{file}: wandb's reader did not run ({exc})") from exc
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise BadContentError(
            f"{file}: wandb's reader refused it ({said[-1] if said else done.returncode})"
        )
    for line in done.stdout.decode("utf-8", "replace").splitlines():
        if line.strip():
            try:
                yield json.loads(line)
            except ValueError:
                raise BadContentError(f"{file}: wandb's reader printed {line[:80]!r}") from None


def read_offline(file: Path) -> TrackedRun:
    run_id = file.stem.removeprefix("run-")
    run = TrackedRun(name=run_id, source=SOURCE, origin=str(file.resolve()))
    run.size = file.stat().st_size
    for record in records(file):
        kind = record.get("type")
        body = record.get(kind, {}) if isinstance(kind, str) else {}
        if kind == "run":
            run.name = str(body.get("display_name") or body.get("run_id") or run_id)
            run.group = str(body["run_group"]) if body.get("run_group") else None
            _configure(run, body.get("config", {}).get("update", {}))
        elif kind == "config":
            _configure(run, body.get("update", {}))
        elif kind == "history":
            item = body.get("item", {})
            step = body.get("step", {}).get("num", item.get("_step"))
            _add_row(run, item, step)
        elif kind == "exit":
            code = int(body.get("exit_code", 0) or 0)
            run.fate = Fate.FINISHED if code == 0 else Fate.CRASHED
            run.fate_reason = f"W&B exit code {code}"
    return run


def _configure(run: TrackedRun, update: dict[str, Any]) -> None:
    for key, value in update.items():
        if str(key).startswith("_"):
            continue
        if isinstance(value, dict) and set(value) == {"value"}:
            value = value["value"]
        run.config[str(key)] = value if isinstance(value, str) else json.dumps(value)


def _add_row(run: TrackedRun, item: dict[str, Any], step: Any, *, export: bool = False) -> None:
    """One history row. In an export every cell is a number or empty: any other text is
    skipped and counted (wandb's own records also carry media and tables, left aside)."""
    number = _number(step)
    if number is None or not float(number).is_integer():
        if export:
            run.skip("rows without a whole _step", f"_step={step!r}"[:60])
        return
    wall = _number(item.get("_timestamp"))
    for name, value in _flat(item):
        if name in INTERNAL:
            continue
        scalar = _number(value)
        if scalar is not None:
            run.add(name, int(number), scalar, wall)
        elif export and isinstance(value, str) and _undecodable(value):
            run.skip("values that are not UTF-8", f"{name}@{int(number)}")
        elif export and not _empty(value):
            run.skip("values that are not numbers", f"{name}@{int(number)} {value!r}"[:60])


def _undecodable(text: str) -> bool:
    return any("\udc80" <= ch <= "\udcff" for ch in text)  # bytes escaped on reading


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip() in ("", "null", "None"))


def _flat(item: dict[str, Any], prefix: str = "") -> Iterable[tuple[str, Any]]:
    """Nested dicts (wandb.log({"train": {"loss": …}})) as train.loss, as W&B shows them."""
    for key, value in item.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from _flat(value, name + ".")
        else:
            yield name, value


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if text in ("", "null", "None") or _undecodable(text):
            return None
        try:
            return float(text)
        except ValueError:
            return None
    return None


def is_export(path: Path) -> bool:
    """A CSV with a `_step` column, or JSON lines whose first object has `_step`."""
    if not path.is_file() or path.suffix.lower() not in EXPORT_SUFFIXES:
        return False
    with path.open(encoding="utf-8", errors="replace") as handle:
        first = handle.readline()
    if path.suffix.lower() == ".csv":
        return "_step" in next(csv.reader([first]), [])
    try:
        data = json.loads(first)
    except ValueError:
        return False
    return isinstance(data, dict) and "_step" in data


def read_export(path: Path) -> TrackedRun:
    """An exported history, named after its file (`eager_history.csv` → eager_history,
    as `ingest` names runs); bytes that are not UTF-8 and lines that are not JSON objects
    are skipped and counted."""
    run = TrackedRun(name=path.stem, source=SOURCE, origin=str(path.resolve()))
    run.size = path.stat().st_size
    # surrogateescape: a byte that is not UTF-8 spoils its own value, not the whole file
    with path.open(encoding="utf-8", errors="surrogateescape", newline="") as handle:
        if path.suffix.lower() == ".csv":
            for row in csv.DictReader(handle):
                item = {k: v for k, v in row.items() if k is not None}
                _add_row(run, item, row.get("_step"), export=True)
        else:
            for n, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    item = json.loads(line)
                except ValueError:
                    item = None
                if not isinstance(item, dict):
                    run.skip("lines that are not JSON objects", f"line {n} {line[:30]!r}")
                    continue
                _add_row(run, item, item.get("_step"), export=True)
    config = _export_config(path)
    if config:
        _configure(run, config)
    return run


def _config_names(path: Path) -> list[str]:
    """`<stem>_config.json`, `<stem>.config.json`, the same without the stem's `_history`,
    then `config.json`: the config files an export may have beside it."""
    stems = [path.stem]
    for suffix in ("_history", "-history", ".history"):
        if path.stem.endswith(suffix) and len(path.stem) > len(suffix):
            stems.append(path.stem[: -len(suffix)])
    names = [f"{stem}{joint}config.json" for stem in stems for joint in ("_", ".")]
    return [*names, "config.json"]


def _export_config(path: Path) -> dict[str, Any]:
    """The first config file `_config_names` finds beside the history."""
    for candidate in _config_names(path):
        file = path.with_name(candidate)
        if file.is_file():
            try:
                data = json.loads(file.read_text(encoding="utf-8"))
            except ValueError as exc:
                raise BadContentError(f"{file}: not JSON ({exc})") from exc
            return data if isinstance(data, dict) else {}
    return {}
