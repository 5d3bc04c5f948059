"""The migrations build the schema the models describe: a column added to a model without a
migration (or the other way round) fails here, not on a production upgrade."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine

from twinhub.db.migrate import alembic_config
from twinhub.db.models import Base

# Made by migration 0009 only: the readings table's history index is declared there, per
# database (PostgreSQL partitions the table), not on the model.
MIGRATION_ONLY_INDEXES = {"ix_telemetry_readings_device_time"}


def _differences(diff: list) -> list:
    """Alembic's differences, less what the migrations make on purpose."""
    kept = []
    for change in diff:
        if change[0] == "remove_index" and change[1].name in MIGRATION_ONLY_INDEXES:
            continue
        kept.append(change)
    return kept


def test_the_migrated_sqlite_schema_is_the_models(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'migrated.db'}")
    config = alembic_config()
    try:
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "head")
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": False})
            assert _differences(compare_metadata(context, Base.metadata)) == []
    finally:
        engine.dispose()
