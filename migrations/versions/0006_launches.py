"""Launches: a run launched several times keeps each launch's steps apart.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01

- launch: one row per launch of a run (number from 1 within the run), who started it
  (source), the command when known, its fate, reason, exit status and times. Every
  existing run gets its launch 1, with the run's fate, times and command (source NULL:
  it was launched before launches were recorded).
- step.launch, metric.launch: second in their primary keys, (run_id, launch, rank, step
  [, name]); existing rows are launch 1. SQLite rebuilds both tables (rows copied);
  PostgreSQL adds the column and rebuilds the key's index.
- log_event.launch, log_file.launch (existing rows: 1); log_file's unique key becomes
  (run_id, path, launch): a log replaced under the same path is a new launch's file.
- comparison.launch_a, comparison.launch_b: the launches compared (existing rows: 1, and
  launch_a NULL where run_a_id is, a comparison with the baseline).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FATES = ("loading", "running", "finished", "oom", "crashed", "nccl", "killed", "stalled", "unknown")
SOURCES = ("log", "watch", "deploy", "hook", "api", "import")


def _one_of(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def _launch_column() -> sa.Column[int]:
    return sa.Column("launch", sa.Integer(), server_default="1", nullable=False)


def upgrade() -> None:
    op.create_table(
        "launch",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(length=20), nullable=True),
        sa.Column("command", sa.Text(), nullable=True),
        sa.Column("fate", sa.String(length=20), nullable=False),
        sa.Column("fate_reason", sa.Text(), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.Column("ended_at", sa.DateTime(), nullable=True),
        sa.CheckConstraint(_one_of("fate", FATES), name=op.f("ck_launch_fate")),
        sa.CheckConstraint(
            f"source IS NULL OR {_one_of('source', SOURCES)}", name=op.f("ck_launch_source")
        ),
        sa.ForeignKeyConstraint(
            ["run_id"], ["run.id"], name=op.f("fk_launch_run_id_run"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_launch")),
        sa.UniqueConstraint("run_id", "number", name=op.f("uq_launch_run_id_number")),
    )
    # Data: every run that exists was launched once as far as the ledger knows.
    op.execute(
        """
        INSERT INTO launch (run_id, number, source, command, fate, fate_reason, started_at,
                            ended_at)
        SELECT id, 1, NULL, command, fate, fate_reason, coalesce(started_at, created_at),
               ended_at
        FROM run
        """
    )

    for table, key in (
        ("step", ["run_id", "launch", "rank", "step"]),
        ("metric", ["run_id", "launch", "rank", "step", "name"]),
    ):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(_launch_column())
            batch_op.drop_constraint(f"pk_{table}", type_="primary")
            batch_op.create_primary_key(f"pk_{table}", key)

    with op.batch_alter_table("log_event", schema=None) as batch_op:
        batch_op.add_column(_launch_column())

    with op.batch_alter_table("log_file", schema=None) as batch_op:
        batch_op.add_column(_launch_column())
        batch_op.drop_constraint(batch_op.f("uq_log_file_run_id_path"), type_="unique")
        batch_op.create_unique_constraint(
            batch_op.f("uq_log_file_run_id_path_launch"), ["run_id", "path", "launch"]
        )

    with op.batch_alter_table("comparison", schema=None) as batch_op:
        batch_op.add_column(sa.Column("launch_a", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("launch_b", sa.Integer(), nullable=True))
    op.execute(
        "UPDATE comparison SET launch_b = 1, "
        "launch_a = CASE WHEN run_a_id IS NULL THEN NULL ELSE 1 END"
    )


def downgrade() -> None:
    # Only launch 1 fits the older schema: later launches' rows cannot be kept.
    with op.batch_alter_table("comparison", schema=None) as batch_op:
        batch_op.drop_column("launch_b")
        batch_op.drop_column("launch_a")
    op.execute("DELETE FROM log_file WHERE launch <> 1")
    with op.batch_alter_table("log_file", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("uq_log_file_run_id_path_launch"), type_="unique")
        batch_op.create_unique_constraint(batch_op.f("uq_log_file_run_id_path"), ["run_id", "path"])
        batch_op.drop_column("launch")
    op.execute("DELETE FROM log_event WHERE launch <> 1")
    with op.batch_alter_table("log_event", schema=None) as batch_op:
        batch_op.drop_column("launch")
    for table, key in (
        ("metric", ["run_id", "rank", "step", "name"]),
        ("step", ["run_id", "rank", "step"]),
    ):
        op.execute(f"DELETE FROM {table} WHERE launch <> 1")
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_constraint(f"pk_{table}", type_="primary")
            batch_op.create_primary_key(f"pk_{table}", key)
            batch_op.drop_column("launch")
    op.drop_table("launch")
