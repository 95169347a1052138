"""Held columns: each launch says which step columns its rows hold a value in.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02

- launch.held_columns: one bit per step column (ledger.store.steps.HELD_ORDER, copied
  below as it was at this revision), set by the step writer as it writes. A reader reads
  the columns it names instead of counting every column over every row first. Existing
  launches get theirs counted here, in one pass over the step table's key; NULL means not
  known, and readers then count.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

HELD_ORDER = (
    "wall_time", "step_time_s", "gpu_time_s", "tokens", "throughput", "loss",
    "memory_allocated_mib", "memory_reserved_mib", "wait_s",
)  # fmt: skip


def upgrade() -> None:
    with op.batch_alter_table("launch", schema=None) as batch_op:
        batch_op.add_column(sa.Column("held_columns", sa.Integer(), nullable=True))
    bits = " + ".join(
        f"CASE WHEN count({name}) > 0 THEN {1 << i} ELSE 0 END" for i, name in enumerate(HELD_ORDER)
    )
    op.execute(
        f"UPDATE launch SET held_columns = (SELECT {bits} FROM step "
        "WHERE step.run_id = launch.run_id AND step.launch = launch.number)"
    )


def downgrade() -> None:
    with op.batch_alter_table("launch", schema=None) as batch_op:
        batch_op.drop_column("held_columns")
