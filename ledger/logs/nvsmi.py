"""nvidia-smi output: the CSV of `--query-gpu` (with or without header and units) and the
plain table. Rows become `Gpu` values keyed by index; the last sighting of a GPU wins.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ledger.logs.numbers import memory_scale, to_float
from ledger.logs.state import Serial

DEFAULT_QUERY = ("index", "memory.used", "utilization.gpu")

_QUERY = re.compile(r"--query-gpu[= ]([\w.,\-]+)")
_HEADER_FIELD = re.compile(r"[a-z_]+(?:\.[a-z_]+)*(?: \[[^\]]*\])?")
_TABLE_GPU = re.compile(r"^\|\s+(?P<index>\d+)\s+(?P<name>.+?)\s+(?:On|Off)\s+\|")
_TABLE_MEM = re.compile(r"(?P<used>\d+)\s*MiB\s*/\s*(?P<total>\d+)\s*MiB")
_TABLE_UTIL = re.compile(r"(?P<util>\d+)%")


@dataclass
class Gpu(Serial):
    index: int
    name: str | None = None
    memory_used_mib: float | None = None
    memory_total_mib: float | None = None
    utilization_pct: float | None = None


def describe(gpus: list[Any]) -> str:
    """`8 GPUs, 61.2 GiB used on average, 0% util` for a person (GPUs as records or dicts)."""
    rows = [g if isinstance(g, dict) else g.to_dict() for g in gpus]
    used = [float(g["memory_used_mib"]) for g in rows if g.get("memory_used_mib") is not None]
    util = [float(g["utilization_pct"]) for g in rows if g.get("utilization_pct") is not None]
    bits = [f"{len(gpus)} GPU{'s' if len(gpus) != 1 else ''}"]
    if used:
        bits.append(f"{sum(used) / len(used) / 1024:.1f} GiB used on average")
    if util:
        bits.append(f"{sum(util) / len(util):.0f}% util")
    return ", ".join(bits)


def query_from_command(command: str) -> tuple[str, ...] | None:
    """The fields asked for by `nvidia-smi --query-gpu=a,b,c` in a command line."""
    m = _QUERY.search(command)
    if m is None:
        return None
    fields = tuple(f.strip().lower() for f in m.group(1).split(",") if f.strip())
    return fields or None


def header_fields(line: str) -> tuple[str, ...] | None:
    """`index, memory.used [MiB], utilization.gpu [%]` → the field names, else None."""
    if "," not in line or not any(k in line for k in ("memory.", "utilization.", "index", "name")):
        return None
    parts = [p.strip() for p in line.split(",")]
    if not all(_HEADER_FIELD.fullmatch(p) for p in parts):
        return None
    names = tuple(p.split(" [", 1)[0] for p in parts)
    if not any("." in n or n in ("index", "name", "uuid") for n in names):
        return None
    return names


def csv_row(line: str, fields: tuple[str, ...] | None, expect_index: int | None) -> Gpu | None:
    """One CSV row. Without known fields, columns are guessed from units, or taken to be
    `index, memory.used, utilization.gpu`; a guessed row must carry the next GPU index."""
    if "," not in line:
        return None
    cells = [c.strip() for c in line.split(",")]
    if len(cells) < 2 or len(cells) > 32:
        return None
    guessed = fields is None or len(fields) != len(cells)
    if fields is None or guessed:
        fields = _guess(cells)
        if fields is None:
            return None
    gpu = Gpu(index=-1)
    for name, cell in zip(fields, cells, strict=False):
        if name == "index":
            if not cell.isdigit():
                return None
            gpu.index = int(cell)
        elif name == "name":
            gpu.name = cell
        elif name == "memory.used":
            gpu.memory_used_mib = _mib(cell)
        elif name == "memory.total":
            gpu.memory_total_mib = _mib(cell)
        elif name == "utilization.gpu":
            gpu.utilization_pct = _pct(cell)
    if gpu.index < 0:
        if expect_index is None:
            return None
        gpu.index = expect_index
    if guessed and expect_index is not None and gpu.index != expect_index:
        return None
    if gpu.memory_used_mib is None and gpu.utilization_pct is None and gpu.name is None:
        return None
    return gpu


def _guess(cells: list[str]) -> tuple[str, ...] | None:
    if not cells[0].isdigit():
        return None
    names: list[str] = ["index"]
    memory = ["memory.used", "memory.total"]
    rest = cells[1:]
    with_units = any(c.endswith("MiB") or c.endswith("%") for c in rest)
    if not with_units:
        if len(cells) == 3 and all(_number(c) for c in rest):
            return DEFAULT_QUERY
        return None
    for cell in rest:
        if cell.endswith("MiB") and memory:
            names.append(memory.pop(0))
        elif cell.endswith("%"):
            names.append("utilization.gpu" if "utilization.gpu" not in names else "other")
        elif not _number(cell) and "name" not in names and not cell.startswith("["):
            names.append("name")
        else:
            names.append("other")
    return tuple(names)


def _number(cell: str) -> bool:
    return to_float(cell) is not None


def _mib(cell: str) -> float | None:
    parts = cell.split()
    value = to_float(parts[0]) if parts else None
    if value is None:
        return None
    if len(parts) > 1:
        scale = memory_scale(parts[1])
        return value * scale if scale is not None else value
    return value


def _pct(cell: str) -> float | None:
    return to_float(cell.rstrip("%").strip())


def table_row(line: str, pending: Gpu | None) -> tuple[bool, Gpu | None, Gpu | None]:
    """One line of the plain `nvidia-smi` table, given the GPU whose line came before:
    (whether the line belongs to a table, the GPU now pending, the GPU it completes)."""
    if not line.startswith("|"):
        return False, None, None
    m = _TABLE_GPU.match(line)
    if m is not None:
        return True, Gpu(int(m.group("index")), name=m.group("name").strip()), None
    mem = _TABLE_MEM.search(line)
    if pending is None or mem is None:
        return "MiB" in line or "NVIDIA-SMI" in line or line.startswith("|="), pending, None
    pending.memory_used_mib = float(mem.group("used"))
    pending.memory_total_mib = float(mem.group("total"))
    util = _TABLE_UTIL.search(line, mem.end())
    if util is not None:
        pending.utilization_pct = float(util.group("util"))
    return True, None, pending
