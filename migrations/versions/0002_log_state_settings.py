"""Log reading state and ledger settings.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29

- log_file.state: the log reader's state (JSON) at log_file.offset, so that ingesting a
  grown file goes on from there with the same step numbering, open tracebacks and bars.
- setting: ledger-wide settings as name → JSON value (e.g. `log.patterns`, the user's
  own step-line regexes).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("log_file") as batch:
        batch.add_column(sa.Column("state", sa.Text(), nullable=True))
    op.create_table(
        "setting",
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_setting")),
    )


def downgrade() -> None:
    op.drop_table("setting")
    with op.batch_alter_table("log_file") as batch:
        batch.drop_column("state")
