"""What differs between SQLite and PostgreSQL lives behind one seam (twinhub.db.dialects,
and the telemetry store's writes in twinhub.telemetry.dialects): no other module branches
on the database's name, nor carries a flag saying which one it runs on (issue 28, "Storage
dialects behind one seam"). Read from the source, so nothing is imported."""

from __future__ import annotations

import re
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[2] / "src" / "twinhub"
BRANCH = re.compile(
    r"dialect\.name\b|get_backend_name\(\)\s*[!=]=|[!=]=\s*\"(postgresql|sqlite)\"|"
    r"\"(postgresql|sqlite)\"\s*[!=]=|"
    # A flag told which database it is: `self.postgres`, `postgres: bool`, `is_sqlite(url)`.
    r"\.postgres\b|\bpostgres\s*:\s*bool\b|\bis_(postgres|postgresql|sqlite)\b"
)
# One module per database: the storage layer's, and the telemetry store's (which speak its
# rows: readings, device state, rollup plans; the storage layer imports no telemetry).
SEAMS = ("twinhub/db/dialects/", "twinhub/telemetry/dialects/")
# Modules still told which database they run on, each for a reason of its own.
ALLOWED = {
    # Builds the engine, before there is one to ask: SQLite's pragmas and statement clock,
    # PostgreSQL's timeouts.
    "twinhub/db/engine.py",
    # The node's read path opens its own connections from the URL (a sqlite3 file
    # connection, an asyncpg pool), beside the engine.
    "twinhub/services/read_model.py",
}


def branches() -> list[str]:
    found = []
    for path in sorted(SOURCE.rglob("*.py")):
        where = path.relative_to(SOURCE.parent).as_posix()
        if where.startswith(SEAMS) or "/migrations/" in where or where in ALLOWED:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if BRANCH.search(line):
                found.append(f"{where}:{number}: {line.strip()}")
    return found


def test_no_module_branches_on_the_database_name() -> None:
    offenders = branches()
    assert not offenders, "branch on the dialect outside twinhub.db.dialects:\n" + "\n".join(
        offenders
    )


def test_allowed_modules_still_branch() -> None:
    """An allowance whose module no longer branches would let the next one in unseen."""
    for where in ALLOWED:
        text = (SOURCE.parent / where).read_text(encoding="utf-8")
        assert BRANCH.search(text), where


def test_the_telemetry_store_and_its_builders_are_checked() -> None:
    """The store's COPY, partitions, staged rollups and device locks live in
    telemetry/dialects; the store and what builds it are held to the rule."""
    for where in (
        "twinhub/telemetry/store.py",
        "twinhub/telemetry/bootstrap.py",
        "twinhub/db/bootstrap.py",
        "twinhub/platform.py",
    ):
        assert (SOURCE.parent / where).is_file(), where
        assert where not in ALLOWED and not where.startswith(SEAMS), where


def test_the_check_sees_a_branch_and_a_flag() -> None:
    """The forms the store and the platform used before the seam are caught."""
    for line in (
        "if self.postgres:",
        "postgres: bool,",
        'self.engine.dialect.name == "postgresql",',
        'url.get_backend_name() == "sqlite"',
        '"sqlite" != name',
        "if is_sqlite(url):",
    ):
        assert BRANCH.search(line), line
    for line in ("postgresql_where=text(COUNTED)", '("postgres://", "postgresql+asyncpg://")'):
        assert not BRANCH.search(line), line


def test_each_seam_has_one_module_per_database() -> None:
    """The interface, then one module per database, and nothing else in the seam."""
    for seam in SEAMS:
        modules = sorted(path.name for path in (SOURCE.parent / seam).glob("*.py"))
        assert modules == ["__init__.py", "postgresql.py", "sqlite.py"], seam
