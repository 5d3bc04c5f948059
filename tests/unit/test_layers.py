"""The layer contract (.importlinter, docs/architecture.md) holds, and it is a real check:
a back arrow, a migration importing twinhub code or an MRV rule reading the database
breaks it.

import-linter runs as its own process with a source tree first on PYTHONPATH, so the same
contract is checked against this tree and against a copy with a deliberate back import.
"""

from __future__ import annotations

import ast
import configparser
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
CONFIG = ROOT / ".importlinter"
MIGRATIONS = SRC / "twinhub" / "db" / "migrations" / "versions"


def lint(src: Path) -> subprocess.CompletedProcess[str]:
    """`lint-imports` over the twinhub package found first in `src`."""
    script = Path(sys.executable).with_name("lint-imports")
    command = str(script) if script.exists() else shutil.which("lint-imports")
    assert command, "lint-imports (import-linter) is not installed"
    path = os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")])
    return subprocess.run(
        [command, "--config", str(CONFIG), "--no-cache"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": path, "COLUMNS": "250", "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_contract_is_kept() -> None:
    result = lint(SRC)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 3 kept, 0 broken." in result.stdout


def test_a_back_arrow_a_migration_importing_twinhub_and_io_in_mrv_break_it(
    tmp_path: Path,
) -> None:
    copy = tmp_path / "src" / "twinhub"
    shutil.copytree(SRC / "twinhub", copy, ignore=shutil.ignore_patterns("__pycache__"))
    with (copy / "kernel" / "errors.py").open("a") as module:
        module.write("\nfrom twinhub.platform import Platform  # noqa\n")
    revision = sorted((copy / "db" / "migrations" / "versions").glob("0*.py"))[0]
    with revision.open("a") as module:
        module.write("\nfrom twinhub.kernel.clock import utcnow  # noqa\n")
    with (copy / "mrv" / "rules.py").open("a") as module:
        module.write("\nimport sqlalchemy  # noqa\n")

    result = lint(tmp_path / "src")

    assert result.returncode == 1, result.stdout + result.stderr
    assert "Contracts: 0 kept, 3 broken." in result.stdout
    assert "twinhub.kernel is not allowed to import twinhub.platform" in result.stdout
    assert "twinhub.kernel.errors -> twinhub.platform" in result.stdout
    assert "twinhub.db.migrations.versions is not allowed to import twinhub.kernel" in (
        result.stdout
    )
    assert "twinhub.mrv is not allowed to import sqlalchemy" in result.stdout


def test_no_migration_imports_twinhub() -> None:
    """Stricter than the contract (which names modules): not even the package's root."""
    for path in sorted(MIGRATIONS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            assert not any(n == "twinhub" or n.startswith("twinhub.") for n in names), (
                f"{path.name} imports {names}: copy what it needs into it, frozen"
            )


def test_the_migration_contract_names_every_storage_module() -> None:
    """A new module under twinhub.db is forbidden to migrations too."""
    config = configparser.ConfigParser()
    config.read(CONFIG)
    forbidden = set(config["importlinter:contract:migrations"]["forbidden_modules"].split())
    storage = {
        f"twinhub.db.{path.stem}"
        for path in (SRC / "twinhub" / "db").iterdir()
        if path.stem not in ("__init__", "migrations", "__pycache__")
        and (path.suffix == ".py" or (path / "__init__.py").exists())
    }
    assert storage <= forbidden, storage - forbidden
