"""What differs between SQLite and PostgreSQL lives behind one seam (twinhub.db.dialects):
no other module branches on the database's name (issue 28, "Storage dialects behind one
seam"). Read from the source, so nothing is imported."""

from __future__ import annotations

import re
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[2] / "src" / "twinhub"
BRANCH = re.compile(
    r"dialect\.name\b|get_backend_name\(\)\s*[!=]=|[!=]=\s*\"(postgresql|sqlite)\"|"
    r"\"(postgresql|sqlite)\"\s*[!=]="
)
SEAM = "twinhub/db/dialects/"
# Modules still told which database they run on, each for a reason of its own.
ALLOWED = {
    # Builds the engine, before there is one to ask: SQLite's pragmas and statement clock,
    # PostgreSQL's timeouts.
    "twinhub/db/engine.py",
    # The node's read path opens its own connections from the URL (a sqlite3 file
    # connection, an asyncpg pool), beside the engine.
    "twinhub/services/read_model.py",
    # The telemetry store's COPY, partitions and staged rollups: still to move behind
    # the seam (it is told `postgres` by the storage bootstrap, `Storage.postgres`).
    "twinhub/db/bootstrap.py",
}


def branches() -> list[str]:
    found = []
    for path in sorted(SOURCE.rglob("*.py")):
        where = path.relative_to(SOURCE.parent).as_posix()
        if where.startswith(SEAM) or "/migrations/" in where or where in ALLOWED:
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
