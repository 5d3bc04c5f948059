"""The migrations build the schema the models describe: a column added to a model without a
migration (or the other way round) fails here, not on a production upgrade."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, text

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


_INDEXES = {
    "postgresql": "SELECT indexname, indexdef FROM pg_indexes"
    " WHERE tablename IN ('domains', 'relationships')",
    "sqlite": "SELECT name, sql FROM sqlite_master"
    " WHERE type = 'index' AND tbl_name IN ('domains', 'relationships')",
}


async def test_indexes_a_create_skips(registry: Any) -> None:
    """0018: the parent and owner indexes hold only domains that have one, and a
    relationship's source is indexed once (by the unique edge), on both databases."""
    engine = registry.platform.engine
    async with engine.connect() as connection:
        found = dict((await connection.execute(text(_INDEXES[engine.dialect.name]))).all())
    assert "ix_relationships_source_did" not in found
    for name, column in (
        ("ix_domains_parent_did", "parent_did"),
        ("ix_domains_owner_customer_id", "owner_customer_id"),
    ):
        assert f"{column} IS NOT NULL" in found[name].replace("(", "").replace(")", ""), found[name]
