"""The README stays true: its commands exist and every setting is documented."""

from __future__ import annotations

import re
from pathlib import Path

from twinhub.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_every_setting_is_documented() -> None:
    documented = set(re.findall(r"^\| `([A-Z_]+)` \|", README, re.MULTILINE))
    assert set(Settings.environment_names()) <= documented


def test_first_commands_are_the_ones_ci_runs() -> None:
    block = README.split("```sh", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert commands == ["./dev serve", "./dev test"]
    assert "./dev test" in (ROOT / ".ci" / "run").read_text()
