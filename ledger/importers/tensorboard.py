"""TensorBoard event files, read with TensorBoard's own event reader (the `[tensorboard]`
extra): one run per folder of `events.out.tfevents.*` files, scalars by tag and step, wall
time kept. Scalars written as summaries' simple values (torch.utils.tensorboard,
tensorboardX, TF1) and as TF2 scalar tensors both count. A step written twice (a restarted
run appending to its folder) keeps the value written last.

Besides scalars, what an event file can say of a run: its hyperparameters (the hparams
plugin; torch's `add_hparams` writes them into a sub-folder named by a timestamp, which
belongs to its run), a session's end (hparams' session_end_info, TF1's SessionLog STOP)
and, indirectly, its announced length (see ledger.importers.endings). A file whose
records TensorBoard's reader stops short of (a corrupt record, a cut-off tail) is
reported in the run's problems with how much of it was read.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path
from typing import Any

from ledger.errors import MissingExtraError
from ledger.importers import endings
from ledger.model.imports import TrackedRun
from ledger.model.terms import Fate

EVENT_PREFIX = "events.out.tfevents."
SOURCE = "tensorboard"
HPARAMS = "hparams"
# torch's add_hparams(run_name=None) writes into <run>/<time.time()>/
_HPARAMS_FOLDER = re.compile(r"\d{9,}\.\d+")
SESSION_STOP = 2  # SessionLog.STOP
# hparams' Status: what a session end says
SESSION_FATES = {1: Fate.FINISHED, 2: Fate.CRASHED, 3: Fate.RUNNING}
SESSION_WORDS = {1: "STATUS_SUCCESS", 2: "STATUS_FAILURE", 3: "STATUS_RUNNING"}
RECORD_FRAME = 16  # a record: 8-byte length, 4-byte length crc, the event, 4-byte crc


def is_event_file(path: Path) -> bool:
    return path.name.startswith(EVENT_PREFIX) and path.is_file()


def event_folders(path: Path) -> list[Path]:
    """The folders under `path` (itself included) that hold a run's event files, in order
    (a hyperparameter sub-folder goes with its run: see `_files`)."""
    if path.is_file():
        return [path.parent]
    found = {p.parent for p in path.rglob(EVENT_PREFIX + "*") if p.is_file()}
    return sorted(f for f in found if not (_is_hparams_folder(f) and f.parent in found))


def _is_hparams_folder(folder: Path) -> bool:
    return _HPARAMS_FOLDER.fullmatch(folder.name) is not None


def _files(folder: Path) -> list[Path]:
    own = sorted(p for p in folder.glob(EVENT_PREFIX + "*") if p.is_file())
    for sub in sorted(p for p in folder.iterdir() if p.is_dir() and _is_hparams_folder(p)):
        own += sorted(p for p in sub.glob(EVENT_PREFIX + "*") if p.is_file())
    return own


def _reader() -> Any:
    try:
        from tensorboard.backend.event_processing import event_file_loader
    except ImportError:
        raise MissingExtraError("TensorBoard event files", "tensorboard", "tensorboard") from None
    return event_file_loader


class _Reading:
    """One run's events as they are read: scalars into the run, the rest remembered."""

    def __init__(self, run: TrackedRun) -> None:
        self.run = run
        self.plugins: dict[str, str] = {}  # tag → plugin (TF2 says it on a tag's first value)
        self.last: tuple[int, float] | None = None  # the last step, when it was first logged
        self.session_end: tuple[int, float] | None = None  # (status, wall time)
        self.stopped_at: int | None = None  # the step of a SessionLog STOP

    def event(self, event: Any) -> None:
        if event.HasField("session_log"):
            if event.session_log.status == SESSION_STOP:
                self.stopped_at = int(event.step)
            return
        if not event.HasField("summary"):
            return
        step, wall = int(event.step), float(event.wall_time)
        for value in event.summary.value:
            tag = value.tag
            if value.HasField("metadata") and value.metadata.plugin_data.plugin_name:
                self.plugins[tag] = value.metadata.plugin_data.plugin_name
            if value.HasField("simple_value"):
                self._scalar(tag, step, float(value.simple_value), wall)
            elif self.plugins.get(tag) == HPARAMS:
                self._hparams(value, wall)
            elif value.HasField("tensor"):
                number = self._tensor(tag, step, value.tensor)
                if number is not None:
                    self._scalar(tag, step, number, wall)

    def _scalar(self, tag: str, step: int, value: float, wall: float) -> None:
        self.run.add(tag, step, value, wall)
        if self.last is None or (step, -wall) > (self.last[0], -self.last[1]):
            self.last = (step, wall)  # a later step, or the last one's first logging

    def _tensor(self, tag: str, step: int, proto: Any) -> float | None:
        """A scalar tensor's value; None for a tensor that is not one number."""
        from tensorboard.util import tensor_util

        try:
            array = tensor_util.make_ndarray(proto)
        except (ValueError, TypeError) as exc:
            self.run.skip("unreadable tensors", f"{tag}@{step}: {exc}"[:80])
            return None
        if array.size != 1 or array.dtype.kind not in "fiub":
            return None
        return float(array.reshape(-1)[0])

    def _hparams(self, value: Any, wall: float) -> None:
        from tensorboard.plugins.hparams import plugin_data_pb2

        try:
            data = plugin_data_pb2.HParamsPluginData.FromString(value.metadata.plugin_data.content)
        except Exception as exc:  # protobuf's DecodeError: a damaged record, named
            self.run.skip("unreadable hyperparameter records", f"{value.tag}: {exc}"[:80])
            return
        if data.HasField("session_start_info"):
            for name, given in data.session_start_info.hparams.items():
                kind = given.WhichOneof("kind")
                if kind == "string_value":
                    self.run.config[name] = given.string_value
                elif kind == "number_value":
                    number = given.number_value
                    self.run.config[name] = (
                        str(int(number)) if number.is_integer() else repr(number)
                    )
                elif kind == "bool_value":
                    self.run.config[name] = "true" if given.bool_value else "false"
        if data.HasField("session_end_info"):
            self.session_end = (int(data.session_end_info.status), wall)

    def fate(self) -> None:
        """What the files say of the ending: a SessionLog STOP, a session end written
        once the last step was logged (one written as the run began says nothing: the
        steps after it came later), else the announced total."""
        run = self.run
        ended = self.session_end
        if self.stopped_at is not None:
            run.fate = Fate.FINISHED
            run.fate_reason = f"TensorBoard SessionLog STOP at step {self.stopped_at:,}"
        elif ended is not None and (self.last is None or ended[1] >= self.last[1]):
            status = ended[0]
            if status in SESSION_FATES:
                run.fate = SESSION_FATES[status]
                run.fate_reason = f"TensorBoard hparams session end {SESSION_WORDS[status]}"
        endings.finished_by_total(run, "TensorBoard")


def read(folder: Path, root: Path) -> TrackedRun:
    """The run in `folder` (its event files), named by its path under `root`."""
    loader = _reader()
    run = TrackedRun(name=_name(folder, root), source=SOURCE, origin=str(folder.resolve()))
    run.group = folder.resolve().parent.name or None  # runs/eager/rank1/: rank 1 of eager
    reading = _Reading(run)
    for file in _files(folder):
        run.size += file.stat().st_size
        read_records = 0
        for event in loader.LegacyEventFileLoader(str(file)).Load():  # as EventAccumulator
            read_records += 1
            reading.event(event)
        problem = check_records(file, read_records)
        if problem:
            run.problems.append(problem)
    reading.fate()
    return run


def check_records(file: Path, read_records: int) -> str | None:
    """What TensorBoard's reader did not read of `file`, in words; None when it read every
    record. The records are counted by their framing alone (each says its length), so a
    corrupt record (TensorBoard stops at the first whose checksum fails) is told apart
    from the end of the file."""
    framed, end, size = frame(file)
    if read_records >= framed and end == size:
        return None
    if read_records < framed:
        said = (
            f"TensorBoard's reader stopped at record {read_records + 1:,} of "
            f"{framed:,}{' or more' if end < size else ''} (a corrupt record: its checksum "
            f"fails); {framed - read_records:,} records after it not read"
        )
    else:
        said = (
            f"TensorBoard's reader stopped at byte {end:,} of {size:,}: the record there is "
            f"corrupt or cut short ({size - end:,} bytes not read)"
        )
    return f"{file.name}: {said}"


def frame(file: Path) -> tuple[int, int, int]:
    """(records the file's framing holds, where the last whole one ends, the file's size)."""
    size = file.stat().st_size
    count = at = 0
    with file.open("rb") as handle:
        while at + RECORD_FRAME <= size:
            handle.seek(at)
            header = handle.read(8)
            if len(header) < 8:
                break
            (length,) = struct.unpack("<Q", header)
            end = at + RECORD_FRAME + length
            if end > size:
                break
            count, at = count + 1, end
    return count, at, size


def _name(folder: Path, root: Path) -> str:
    """runs/<name>/events… → <name>; a folder given itself → its own name."""
    base = root if root.is_dir() else root.parent
    try:
        relative = folder.resolve().relative_to(base.resolve())
    except ValueError:
        relative = Path(folder.name)
    parts = relative.parts
    return "/".join(parts) if parts else (folder.resolve().name or "tensorboard")
