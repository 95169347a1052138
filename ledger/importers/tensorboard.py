"""TensorBoard event files, read with TensorBoard's own event reader (the `[tensorboard]`
extra): one run per folder of `events.out.tfevents.*` files, scalars by tag and step, wall
time kept. Scalars written as summaries' simple values (torch.utils.tensorboard,
tensorboardX, TF1) and as TF2 scalar tensors both count. A step written twice (a restarted
run appending to its folder) keeps the value written last.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ledger.errors import MissingExtraError
from ledger.model.imports import TrackedRun

EVENT_PREFIX = "events.out.tfevents."
SOURCE = "tensorboard"


def is_event_file(path: Path) -> bool:
    return path.name.startswith(EVENT_PREFIX) and path.is_file()


def event_folders(path: Path) -> list[Path]:
    """The folders under `path` (itself included) that hold event files, in order."""
    if path.is_file():
        return [path.parent]
    found = {p.parent for p in path.rglob(EVENT_PREFIX + "*") if p.is_file()}
    return sorted(found)


def _accumulator() -> Any:
    try:
        from tensorboard.backend.event_processing import event_accumulator
    except ImportError:
        raise MissingExtraError("TensorBoard event files", "tensorboard", "tensorboard") from None
    return event_accumulator


def read(folder: Path, root: Path) -> TrackedRun:
    """The run in `folder` (its event files), named by its path under `root`."""
    ea = _accumulator()
    acc = ea.EventAccumulator(
        str(folder), size_guidance={ea.SCALARS: 0, ea.TENSORS: 0}, purge_orphaned_data=False
    )
    acc.Reload()
    tags = acc.Tags()
    name = _name(folder, root)
    run = TrackedRun(name=name, source=SOURCE, origin=str(folder.resolve()))
    run.size = sum(p.stat().st_size for p in folder.glob(EVENT_PREFIX + "*") if p.is_file())
    for tag in tags.get("scalars", []):
        for event in acc.Scalars(tag):
            run.add(tag, int(event.step), float(event.value), float(event.wall_time))
    for tag in tags.get("tensors", []):
        for event in acc.Tensors(tag):
            value = _scalar(event.tensor_proto)
            if value is not None:
                run.add(tag, int(event.step), value, float(event.wall_time))
    return run


def _scalar(proto: Any) -> float | None:
    """A TF2 scalar summary's value; None for a tensor that is not one number."""
    from tensorboard.util import tensor_util

    array = tensor_util.make_ndarray(proto)
    if array.size != 1 or array.dtype.kind not in "fiub":
        return None
    return float(array.reshape(-1)[0])


def _name(folder: Path, root: Path) -> str:
    """runs/<name>/events… → <name>; a folder given itself → its own name."""
    base = root if root.is_dir() else root.parent
    try:
        relative = folder.resolve().relative_to(base.resolve())
    except ValueError:
        relative = Path(folder.name)
    parts = relative.parts
    return "/".join(parts) if parts else (folder.resolve().name or "tensorboard")
