"""The comparison table: `ledger compare A B --resolve H` keeps its verdict here.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29

One row per recorded comparison of run b against run a: the steady medians, the
difference with its 95 % interval and p-value, the settings that decided the verdict,
and the hypothesis it resolved. Plain SQLAlchemy types, as in 0001.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "comparison",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("investigation_id", sa.Integer(), nullable=False),
        sa.Column("hypothesis_id", sa.Integer(), nullable=True),
        sa.Column("run_a_id", sa.Integer(), nullable=False),
        sa.Column("run_b_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("unit", sa.String(length=50), nullable=True),
        sa.Column("steady_from_a", sa.Integer(), nullable=True),
        sa.Column("steady_from_b", sa.Integer(), nullable=True),
        sa.Column("median_a", sa.Float(), nullable=True),
        sa.Column("median_b", sa.Float(), nullable=True),
        sa.Column("delta_pct", sa.Float(), nullable=True),
        sa.Column("ci_low_pct", sa.Float(), nullable=True),
        sa.Column("ci_high_pct", sa.Float(), nullable=True),
        sa.Column("p_value", sa.Float(), nullable=True),
        sa.Column("threshold_pct", sa.Float(), nullable=False),
        sa.Column("alpha", sa.Float(), nullable=False),
        sa.Column("verdict", sa.String(length=20), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.CheckConstraint(
            "verdict IN ('regression', 'improvement', 'no-change')",
            name=op.f("ck_comparison_verdict"),
        ),
        sa.ForeignKeyConstraint(
            ["hypothesis_id"],
            ["hypothesis.id"],
            name=op.f("fk_comparison_hypothesis_id_hypothesis"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["investigation_id"],
            ["investigation.id"],
            name=op.f("fk_comparison_investigation_id_investigation"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["run_a_id"], ["run.id"], name=op.f("fk_comparison_run_a_id_run"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["run_b_id"], ["run.id"], name=op.f("fk_comparison_run_b_id_run"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_comparison")),
    )
    with op.batch_alter_table("comparison", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_comparison_hypothesis_id"), ["hypothesis_id"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_comparison_run_a_id"), ["run_a_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_comparison_run_b_id"), ["run_b_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("comparison", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_comparison_run_b_id"))
        batch_op.drop_index(batch_op.f("ix_comparison_run_a_id"))
        batch_op.drop_index(batch_op.f("ix_comparison_hypothesis_id"))
    op.drop_table("comparison")
