"""The initial schema: investigation, hypothesis, patch (+ patch_file), run, deploy_step,
log_file, step, metric, log_event, probe, gpu_sample.

Revision ID: 0001
Revises:
Create Date: 2026-11-29

Types are spelled as plain SQLAlchemy types (Float, DateTime) rather than ledger's
TypeDecorators, so that this revision stays the same when those classes change.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "investigation",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("baseline_value", sa.Float(), nullable=True),
        sa.Column("baseline_unit", sa.String(length=50), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_investigation")),
        sa.UniqueConstraint("name", name=op.f("uq_investigation_name")),
    )
    op.create_table(
        "hypothesis",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("investigation_id", sa.Integer(), nullable=False),
        sa.Column("parent_id", sa.Integer(), nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("resolved_at", sa.DateTime(), nullable=True),
        sa.CheckConstraint(
            "status IN ('open', 'confirmed', 'refuted', 'inconclusive')",
            name=op.f("ck_hypothesis_status"),
        ),
        sa.ForeignKeyConstraint(
            ["investigation_id"],
            ["investigation.id"],
            name=op.f("fk_hypothesis_investigation_id_investigation"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["parent_id"],
            ["hypothesis.id"],
            name=op.f("fk_hypothesis_parent_id_hypothesis"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_hypothesis")),
    )
    with op.batch_alter_table("hypothesis", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_hypothesis_investigation_id"), ["investigation_id"], unique=False
        )

    op.create_table(
        "patch",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("hypothesis_id", sa.Integer(), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("diff", sa.Text(), nullable=True),
        sa.Column("git_commit", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["hypothesis_id"],
            ["hypothesis.id"],
            name=op.f("fk_patch_hypothesis_id_hypothesis"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_patch")),
    )
    with op.batch_alter_table("patch", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_patch_hypothesis_id"), ["hypothesis_id"], unique=False)

    op.create_table(
        "patch_file",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("patch_id", sa.Integer(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(
            ["patch_id"],
            ["patch.id"],
            name=op.f("fk_patch_file_patch_id_patch"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_patch_file")),
        sa.UniqueConstraint("patch_id", "path", name=op.f("uq_patch_file_patch_id_path")),
    )
    op.create_table(
        "run",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("investigation_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("patch_id", sa.Integer(), nullable=True),
        sa.Column("command", sa.Text(), nullable=True),
        sa.Column("host", sa.String(length=200), nullable=True),
        sa.Column("throughput_unit", sa.String(length=50), nullable=True),
        sa.Column("fate", sa.String(length=20), nullable=False),
        sa.Column("fate_reason", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=True),
        sa.Column("ended_at", sa.DateTime(), nullable=True),
        sa.CheckConstraint(
            "fate IN ('loading', 'running', 'finished', 'oom', 'crashed', 'nccl', 'killed', 'stalled', 'unknown')",
            name=op.f("ck_run_fate"),
        ),
        sa.ForeignKeyConstraint(
            ["investigation_id"],
            ["investigation.id"],
            name=op.f("fk_run_investigation_id_investigation"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["patch_id"], ["patch.id"], name=op.f("fk_run_patch_id_patch"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_run")),
        sa.UniqueConstraint("investigation_id", "name", name=op.f("uq_run_investigation_id_name")),
    )
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_run_patch_id"), ["patch_id"], unique=False)

    op.create_table(
        "deploy_step",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("patch_id", sa.Integer(), nullable=True),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("command", sa.Text(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.Column("ended_at", sa.DateTime(), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("timed_out", sa.Boolean(), nullable=False),
        sa.Column("recorded_only", sa.Boolean(), nullable=False),
        sa.Column("output", sa.Text(), nullable=True),
        sa.Column("output_bytes", sa.Integer(), nullable=True),
        sa.Column("artifact_path", sa.Text(), nullable=True),
        sa.Column("artifact_sha256", sa.String(length=64), nullable=True),
        sa.Column("expected_sha256", sa.String(length=64), nullable=True),
        sa.Column("drift", sa.Boolean(), nullable=True),
        sa.ForeignKeyConstraint(
            ["patch_id"],
            ["patch.id"],
            name=op.f("fk_deploy_step_patch_id_patch"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["run_id"], ["run.id"], name=op.f("fk_deploy_step_run_id_run"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_deploy_step")),
    )
    with op.batch_alter_table("deploy_step", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_deploy_step_run_id"), ["run_id"], unique=False)

    op.create_table(
        "log_file",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("offset", sa.Integer(), nullable=False),
        sa.Column("lines", sa.Integer(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("ingested_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"], ["run.id"], name=op.f("fk_log_file_run_id_run"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_log_file")),
        sa.UniqueConstraint("run_id", "path", name=op.f("uq_log_file_run_id_path")),
    )
    op.create_table(
        "metric",
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("rank", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("step", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("value", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"], ["run.id"], name=op.f("fk_metric_run_id_run"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "rank", "step", "name", name=op.f("pk_metric")),
    )
    op.create_table(
        "probe",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("command", sa.Text(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.Column("ended_at", sa.DateTime(), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("timed_out", sa.Boolean(), nullable=False),
        sa.Column("output", sa.Text(), nullable=True),
        sa.Column("fate", sa.String(length=20), nullable=True),
        sa.Column("conclusion", sa.Text(), nullable=True),
        sa.CheckConstraint(
            "fate IS NULL OR fate IN ('loading', 'running', 'finished', 'oom', 'crashed', 'nccl', 'killed', 'stalled', 'unknown')",
            name=op.f("ck_probe_fate"),
        ),
        sa.ForeignKeyConstraint(
            ["run_id"], ["run.id"], name=op.f("fk_probe_run_id_run"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_probe")),
    )
    with op.batch_alter_table("probe", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_probe_run_id"), ["run_id"], unique=False)

    op.create_table(
        "step",
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("rank", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("step", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("wall_time", sa.Float(), nullable=True),
        sa.Column("step_time_s", sa.Float(), nullable=True),
        sa.Column("gpu_time_s", sa.Float(), nullable=True),
        sa.Column("tokens", sa.Integer(), nullable=True),
        sa.Column("throughput", sa.Float(), nullable=True),
        sa.Column("loss", sa.Float(), nullable=True),
        sa.Column("memory_allocated_mib", sa.Float(), nullable=True),
        sa.Column("memory_reserved_mib", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"], ["run.id"], name=op.f("fk_step_run_id_run"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "rank", "step", name=op.f("pk_step")),
    )
    op.create_table(
        "gpu_sample",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("probe_id", sa.Integer(), nullable=False),
        sa.Column("gpu_index", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=True),
        sa.Column("memory_used_mib", sa.Float(), nullable=True),
        sa.Column("memory_total_mib", sa.Float(), nullable=True),
        sa.Column("utilization_pct", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["probe_id"],
            ["probe.id"],
            name=op.f("fk_gpu_sample_probe_id_probe"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_gpu_sample")),
        sa.UniqueConstraint("probe_id", "gpu_index", name=op.f("uq_gpu_sample_probe_id_gpu_index")),
    )
    op.create_table(
        "log_event",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("log_file_id", sa.Integer(), nullable=True),
        sa.Column("line", sa.Integer(), nullable=True),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.CheckConstraint(
            "kind IN ('traceback', 'oom', 'nccl', 'recompile', 'signal', 'exit', 'warning', 'error', 'progress', 'loading', 'finished')",
            name=op.f("ck_log_event_kind"),
        ),
        sa.ForeignKeyConstraint(
            ["log_file_id"],
            ["log_file.id"],
            name=op.f("fk_log_event_log_file_id_log_file"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["run_id"], ["run.id"], name=op.f("fk_log_event_run_id_run"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_log_event")),
    )
    with op.batch_alter_table("log_event", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_log_event_log_file_id"), ["log_file_id"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_log_event_run_id_kind"), ["run_id", "kind"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("log_event", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_log_event_run_id_kind"))
        batch_op.drop_index(batch_op.f("ix_log_event_log_file_id"))

    op.drop_table("log_event")
    op.drop_table("gpu_sample")
    op.drop_table("step")
    with op.batch_alter_table("probe", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_probe_run_id"))

    op.drop_table("probe")
    op.drop_table("metric")
    op.drop_table("log_file")
    with op.batch_alter_table("deploy_step", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_deploy_step_run_id"))

    op.drop_table("deploy_step")
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_run_patch_id"))

    op.drop_table("run")
    op.drop_table("patch_file")
    with op.batch_alter_table("patch", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_patch_hypothesis_id"))

    op.drop_table("patch")
    with op.batch_alter_table("hypothesis", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_hypothesis_investigation_id"))

    op.drop_table("hypothesis")
    op.drop_table("investigation")
