"""The torch-side hook's run-level figures: run.hook_dropped_steps and run.hook_cost_us.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30

- hook_dropped_steps: steps StepMeter dropped because its writer fell behind (a locked or
  slow database), summed over every rank that wrote into the run. Existing runs get 0.
- hook_cost_us: StepMeter's own caller-side cost per step (median, microseconds); with
  several ranks, the largest of their medians.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("hook_dropped_steps", sa.Integer(), server_default="0", nullable=False)
        )
        batch_op.add_column(sa.Column("hook_cost_us", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.drop_column("hook_cost_us")
        batch_op.drop_column("hook_dropped_steps")
