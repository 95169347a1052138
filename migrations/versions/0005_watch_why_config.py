"""What watch, why and the log reader need: wait time, provenance, run configuration,
GPU samples of a run, event steps, watch verdicts.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01

- step.wait_s: time between the end of one step and the start of the next (the hook).
- step.log_file_id, metric.log_file_id: the log a row was read from, so that re-reading a
  rewritten log removes its own rows and never the hook's. Existing rows: NULL, except that
  a run's rows are attributed to its log when the run has exactly one log file and the
  hook never wrote to it (no hook cost recorded) — the only case where the origin is sure.
- Integer columns that can pass 2^31 become BIGINT on PostgreSQL (SQLite's INTEGER is
  64-bit already): step/metric rank and step, step.tokens, log_file size/offset/lines,
  log_event.line, deploy_step.output_bytes. PostgreSQL rewrites those tables.
- metric.name: VARCHAR(100) → TEXT (FSDP parameter names are longer). The table is rebuilt
  on SQLite; its rows are copied.
- log_file.unread_lines, log_file.format: what the reader could not read, and what the file is.
- log_event.step, log_event.probe_id; new event kinds graph_break, stall, restart.
- gpu_sample: probe_id may be NULL; run_id, rank, step, sampled_at, power, clocks,
  temperature and throttle reasons for the hook's NVML samples.
- run_config: (run_id, source, key) → value.
- comparison: kind ('compare' or 'watch'), run_a_id may be NULL (against the baseline),
  reference_value, effective_a/b, decided_at_step; verdicts same and undecided.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_KINDS = (
    "traceback", "oom", "nccl", "recompile", "signal", "exit", "warning", "error",
    "progress", "loading", "finished",
)  # fmt: skip
NEW_KINDS = (*OLD_KINDS, "graph_break", "stall", "restart")
OLD_VERDICTS = ("regression", "improvement", "no-change")
NEW_VERDICTS = (*OLD_VERDICTS, "same", "undecided")


_WIDENED = {
    "step": ("rank", "step", "tokens"),
    "metric": ("rank", "step"),
    "log_file": ("size", "offset", "lines"),
    "log_event": ("line",),
    "deploy_step": ("output_bytes",),
}
# Columns this revision adds, in the type the models give them on each backend.
_BIG = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _one_of(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def upgrade() -> None:
    op.create_table(
        "run_config",
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(length=20), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("value", sa.Text(), nullable=True),
        sa.CheckConstraint(
            "source IN ('hook', 'log', 'deploy', 'import', 'api')",
            name=op.f("ck_run_config_source"),
        ),
        sa.ForeignKeyConstraint(
            ["run_id"], ["run.id"], name=op.f("fk_run_config_run_id_run"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "source", "key", name=op.f("pk_run_config")),
    )

    with op.batch_alter_table("comparison", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("kind", sa.String(length=10), server_default="compare", nullable=False)
        )
        batch_op.add_column(sa.Column("reference_value", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("effective_a", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("effective_b", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("decided_at_step", _BIG, nullable=True))
        batch_op.alter_column("run_a_id", existing_type=sa.Integer(), nullable=True)
        batch_op.drop_constraint(batch_op.f("ck_comparison_verdict"), type_="check")
        batch_op.create_check_constraint(
            batch_op.f("ck_comparison_verdict"), _one_of("verdict", NEW_VERDICTS)
        )
        batch_op.create_check_constraint(
            batch_op.f("ck_comparison_kind"), "kind IN ('compare', 'watch')"
        )

    with op.batch_alter_table("gpu_sample", schema=None) as batch_op:
        batch_op.add_column(sa.Column("run_id", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("rank", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("step", _BIG, nullable=True))
        batch_op.add_column(sa.Column("sampled_at", sa.DateTime(), nullable=True))
        batch_op.add_column(sa.Column("power_w", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("power_limit_w", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("sm_clock_mhz", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("max_sm_clock_mhz", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("temperature_c", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("throttle", sa.Text(), nullable=True))
        batch_op.alter_column("probe_id", existing_type=sa.Integer(), nullable=True)
        batch_op.create_index(batch_op.f("ix_gpu_sample_run_id"), ["run_id"], unique=False)
        batch_op.create_foreign_key(
            batch_op.f("fk_gpu_sample_run_id_run"), "run", ["run_id"], ["id"], ondelete="CASCADE"
        )

    with op.batch_alter_table("log_event", schema=None) as batch_op:
        batch_op.add_column(sa.Column("probe_id", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("step", _BIG, nullable=True))
        batch_op.create_index(batch_op.f("ix_log_event_probe_id"), ["probe_id"], unique=False)
        batch_op.create_foreign_key(
            batch_op.f("fk_log_event_probe_id_probe"),
            "probe",
            ["probe_id"],
            ["id"],
            ondelete="CASCADE",
        )
        batch_op.drop_constraint(batch_op.f("ck_log_event_kind"), type_="check")
        batch_op.create_check_constraint(
            batch_op.f("ck_log_event_kind"), _one_of("kind", NEW_KINDS)
        )

    with op.batch_alter_table("log_file", schema=None) as batch_op:
        batch_op.add_column(sa.Column("unread_lines", _BIG, server_default="0", nullable=False))
        batch_op.add_column(sa.Column("format", sa.String(length=30), nullable=True))

    with op.batch_alter_table("metric", schema=None) as batch_op:
        batch_op.add_column(sa.Column("log_file_id", sa.Integer(), nullable=True))
        batch_op.alter_column(
            "name", existing_type=sa.String(length=100), type_=sa.Text(), existing_nullable=False
        )

    with op.batch_alter_table("step", schema=None) as batch_op:
        batch_op.add_column(sa.Column("wait_s", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("log_file_id", sa.Integer(), nullable=True))

    if op.get_bind().dialect.name == "postgresql":
        # bigint where a 2 GB log's offset or a step counter can pass 2^31 (see above);
        # columns created by this revision are created bigint below the models' BigInt.
        for table, columns in _WIDENED.items():
            for column in columns:
                op.alter_column(table, column, type_=sa.BigInteger(), existing_type=sa.Integer())

    # Data: attribute existing rows to their log where that is certain (see above).
    for table in ("step", "metric"):
        op.execute(
            f"""
            UPDATE {table} SET log_file_id = (
                SELECT min(lf.id) FROM log_file lf WHERE lf.run_id = {table}.run_id
            )
            WHERE run_id IN (
                SELECT lf.run_id FROM log_file lf JOIN run r ON r.id = lf.run_id
                WHERE r.hook_cost_us IS NULL
                GROUP BY lf.run_id HAVING count(*) = 1
            )
            """
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table, columns in _WIDENED.items():
            for column in columns:
                op.alter_column(table, column, type_=sa.Integer(), existing_type=sa.BigInteger())
    with op.batch_alter_table("step", schema=None) as batch_op:
        batch_op.drop_column("log_file_id")
        batch_op.drop_column("wait_s")

    with op.batch_alter_table("metric", schema=None) as batch_op:
        batch_op.alter_column(
            "name", existing_type=sa.Text(), type_=sa.String(length=100), existing_nullable=False
        )
        batch_op.drop_column("log_file_id")

    with op.batch_alter_table("log_file", schema=None) as batch_op:
        batch_op.drop_column("format")
        batch_op.drop_column("unread_lines")

    op.execute(f"DELETE FROM log_event WHERE NOT ({_one_of('kind', OLD_KINDS)})")
    with op.batch_alter_table("log_event", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("ck_log_event_kind"), type_="check")
        batch_op.create_check_constraint(
            batch_op.f("ck_log_event_kind"), _one_of("kind", OLD_KINDS)
        )
        batch_op.drop_constraint(batch_op.f("fk_log_event_probe_id_probe"), type_="foreignkey")
        batch_op.drop_index(batch_op.f("ix_log_event_probe_id"))
        batch_op.drop_column("step")
        batch_op.drop_column("probe_id")

    op.execute("DELETE FROM gpu_sample WHERE probe_id IS NULL")
    with op.batch_alter_table("gpu_sample", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("fk_gpu_sample_run_id_run"), type_="foreignkey")
        batch_op.drop_index(batch_op.f("ix_gpu_sample_run_id"))
        batch_op.alter_column("probe_id", existing_type=sa.Integer(), nullable=False)
        for column in (
            "throttle", "temperature_c", "max_sm_clock_mhz", "sm_clock_mhz", "power_limit_w",
            "power_w", "sampled_at", "step", "rank", "run_id",
        ):  # fmt: skip
            batch_op.drop_column(column)

    op.execute(
        f"DELETE FROM comparison WHERE run_a_id IS NULL OR NOT ({_one_of('verdict', OLD_VERDICTS)})"
    )
    with op.batch_alter_table("comparison", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("ck_comparison_kind"), type_="check")
        batch_op.drop_constraint(batch_op.f("ck_comparison_verdict"), type_="check")
        batch_op.create_check_constraint(
            batch_op.f("ck_comparison_verdict"), _one_of("verdict", OLD_VERDICTS)
        )
        batch_op.alter_column("run_a_id", existing_type=sa.Integer(), nullable=False)
        for column in ("decided_at_step", "effective_b", "effective_a", "reference_value", "kind"):
            batch_op.drop_column(column)

    op.drop_table("run_config")
