"""The documentation site builds in strict mode (a broken link or a missing page fails), and
its settings reference, generated from the settings model, names every setting."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from html import unescape
from pathlib import Path
from types import ModuleType

import pytest
from pydantic import AliasChoices, BaseModel, Field

from twinhub.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def _hook() -> ModuleType:
    """The MkDocs hook that renders the settings reference, loaded as MkDocs loads it."""
    spec = importlib.util.spec_from_file_location(
        "settings_table", ROOT / "docs" / "hooks" / "settings_table.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _env_names(model: type[BaseModel]) -> set[str]:
    """Every environment variable a settings model reads: a nested model's fields by their
    alias when they have one, else by their upper-cased name."""
    names: set[str] = set()
    for name, field in model.model_fields.items():
        inner = field.annotation
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            names |= _env_names(inner)
            continue
        alias = field.validation_alias or field.alias
        if isinstance(alias, AliasChoices):
            alias = next(c for c in alias.choices if isinstance(c, str))
        names.add((alias if isinstance(alias, str) else name).upper())
    return names


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built once for this module with `mkdocs build --strict`."""
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    return out


def test_the_site_builds_in_strict_mode(site: Path) -> None:
    for page in ("index", "getting-started", "settings", "registry-api", "benchmarks"):
        path = site / ("index.html" if page == "index" else f"{page}/index.html")
        assert path.is_file(), page
    tour = (site / "getting-started" / "index.html").read_text()
    assert "monitoring-periods" in tour and "--8&lt;--" not in tour  # the README's tour
    assert "./dev bench" in (site / "benchmarks" / "index.html").read_text()


def test_every_setting_is_documented(site: Path) -> None:
    page = unescape((site / "settings" / "index.html").read_text())
    documented = set(re.findall(r"<td><code>([A-Z0-9_]+)</code></td>", page))
    expected = _env_names(Settings)
    assert len(expected) >= 100
    assert expected <= documented
    # The names operators set today, whatever shape the model takes.
    assert {"DATABASE_URL", "REDIS_URL", "PORT", "MQTT_URL", "ORACLE_BATCH"} <= documented


def test_the_reference_follows_nested_models_and_aliases() -> None:
    """Settings grouped per context keep their flat variable names through aliases: the
    reference gives a section per nested model and the name the variable is read from."""

    class Telemetry(BaseModel):
        """Telemetry ingestion."""

        batch_size: int = Field(1000, alias="TELEMETRY_BATCH_SIZE", description="Most readings.")
        mqtt_url: str | None = Field(None, validation_alias=AliasChoices("MQTT_URL", "mqtt"))

    class Nested(BaseModel):
        port: int = Field(3000, description="USSD gateway port.")
        telemetry: Telemetry = Field(default_factory=Telemetry)

    text = _hook().render(Nested)
    assert "## General" in text and "## Telemetry\n\nTelemetry ingestion.\n" in text
    assert "| `PORT` | int | `3000` | USSD gateway port. |" in text
    assert "| `TELEMETRY_BATCH_SIZE` | int | `1000` | Most readings. |" in text
    assert "| `MQTT_URL` | str (optional) | unset |  |" in text
    assert text.index("`PORT`") < text.index("## Telemetry") < text.index("`MQTT_URL`")
