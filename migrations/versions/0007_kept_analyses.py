"""Kept analyses: compare reads a launch's analysis instead of its steps when they have
not changed since it was made.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02

- launch.steps_rewritten: how many times the launch's stored steps were changed other than
  by adding rows (existing launches: 0).
- kept_analysis: (run_id, launch) → the settings it was made with, the launch's step count
  and steps_rewritten when its steps were read, and the analysis as JSON. Nothing to copy:
  the first compare after the upgrade makes each launch's row.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BIG = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("launch", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("steps_rewritten", sa.Integer(), server_default="0", nullable=False)
        )
    op.create_table(
        "kept_analysis",
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("launch", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("settings", sa.String(length=64), nullable=False),
        sa.Column("steps", _BIG, nullable=False),
        sa.Column("rewritten", sa.Integer(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("made_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["run.id"], name=op.f("fk_kept_analysis_run_id_run"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "launch", name=op.f("pk_kept_analysis")),
    )


def downgrade() -> None:
    op.drop_table("kept_analysis")
    with op.batch_alter_table("launch", schema=None) as batch_op:
        batch_op.drop_column("steps_rewritten")
