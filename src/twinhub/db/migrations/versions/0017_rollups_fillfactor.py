"""telemetry: rollup pages keep room for updates (PostgreSQL fillfactor 70)

Every batch of a project updates the project's rollup rows (count, sum, min, max: none of
them indexed). With full pages such an update cannot stay on its page, so each one also
adds an entry to the primary key's index; with 30 % of each page kept free it is a
heap-only (HOT) update. Measured on the benchmark's hourly readings, the rollup statement's
own CPU fell from about 40 to 27-29 µs per reading (bench/README.md, "Telemetry"). Pages
written before keep their packing until rewritten (VACUUM FULL or pg_repack); SQLite has
no such setting.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-26
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE telemetry_rollups SET (fillfactor = 70)")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE telemetry_rollups RESET (fillfactor)")
