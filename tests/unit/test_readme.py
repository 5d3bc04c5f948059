"""The README stays true and short: its first commands are the ones CI runs, it fits on a
screen, and every file it links to exists. (The settings reference moved to the docs site:
tests/test_docs_site.py checks that it names every setting.)"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def test_first_commands_are_the_ones_ci_runs() -> None:
    block = README.split("```sh", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert commands == ["./dev serve", "./dev test"]
    assert "./dev test" in (ROOT / ".ci" / "run").read_text()


def test_the_readme_fits_on_a_screen_and_its_links_resolve() -> None:
    assert len(README.splitlines()) < 200
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    local = [t for t in targets if not re.match(r"[a-z]+://", t)]
    assert local, "the README links into docs/"
    for target in local:
        assert (ROOT / target).exists(), target
