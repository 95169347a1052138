"""Which of another tracker's scalars fill which step column: the default table and --map.

Every name not in the table (nor mapped) is kept as a metric under its own name. The table
is documented in docs/import.md; change both together.
"""

from __future__ import annotations

from collections.abc import Iterable

from ledger.errors import UsageError
from ledger.model.imports import ColumnMap
from ledger.model.terms import STEP_COLUMNS

# name → (step column, throughput unit or None)
DEFAULT_NAMES: dict[str, tuple[str, str | None]] = {
    "tokens_per_sec": ("throughput", "tokens/s"),
    "tokens_per_second": ("throughput", "tokens/s"),
    "tokens_per_s": ("throughput", "tokens/s"),
    "tps": ("throughput", "tokens/s"),
    "train/tokens_per_sec": ("throughput", "tokens/s"),
    "train/tokens_per_second": ("throughput", "tokens/s"),
    "train_tokens_per_second": ("throughput", "tokens/s"),
    "throughput(tps)": ("throughput", "tokens/s"),  # torchtitan
    "throughput": ("throughput", None),
    "train/throughput": ("throughput", None),
    "samples_per_sec": ("throughput", "samples/s"),
    "samples_per_second": ("throughput", "samples/s"),
    "train_samples_per_second": ("throughput", "samples/s"),
    "loss": ("loss", None),
    "train/loss": ("loss", None),
    "train_loss": ("loss", None),
    "loss_metrics/global_avg_loss": ("loss", None),  # torchtitan
    "lm loss": ("loss", None),  # Megatron
    "step_time": ("step_time_s", None),
    "step_time_s": ("step_time_s", None),
    "train/step_time": ("step_time_s", None),
    "time/step": ("step_time_s", None),
    "time_metrics/end_to_end(s)": ("step_time_s", None),  # torchtitan
    "iteration-time": ("step_time_s", None),  # Megatron
    "tokens": ("tokens", None),
    "num_tokens": ("tokens", None),
    "memory_allocated_mib": ("memory_allocated_mib", None),
    "memory/allocated_mib": ("memory_allocated_mib", None),
    "memory_mib": ("memory_allocated_mib", None),
    "memory_reserved_mib": ("memory_reserved_mib", None),
    "memory/reserved_mib": ("memory_reserved_mib", None),
}
KEEP_AS_METRIC = "metric"  # --map NAME=metric: keep a name of the table as a metric


def column_map(overrides: Iterable[str] = ()) -> ColumnMap:
    """The default table with `overrides` applied: "SRC=COLUMN" (COLUMN a step column, as
    `throughput:samples/s` with its unit) or "SRC=metric"; UsageError on a malformed one."""
    columns = {name: column for name, (column, _) in DEFAULT_NAMES.items()}
    units = {name: unit for name, (_, unit) in DEFAULT_NAMES.items() if unit}
    mine: dict[str, str] = {}
    for spec in overrides:
        name, sep, column = spec.partition("=")
        name, column = name.strip(), column.strip()
        if not sep or not name or not column:
            raise UsageError(f"a name mapping is SOURCE=COLUMN, not {spec!r}")
        if column == KEEP_AS_METRIC:
            columns.pop(name, None)
            columns.pop(name.lower(), None)
            units.pop(name, None)
            continue
        column, _, unit = column.partition(":")
        if column not in STEP_COLUMNS:
            raise UsageError(
                f"no step column {column!r} to map {name!r} onto; columns: "
                f"{', '.join(STEP_COLUMNS)} (or {KEEP_AS_METRIC!r} to keep it a metric)"
            )
        mine[name] = column
        columns.pop(name, None)
        units.pop(name, None)
        if unit:
            units[name] = unit
    # The user's names first: when two names present fill one column, the first one wins.
    return ColumnMap(columns={**mine, **columns}, units=units)
