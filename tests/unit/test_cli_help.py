"""Every command of `twinhub` and every one of its options and arguments explains itself in
whole sentences: a help text that ends with a full stop, shown whole (not cut mid-sentence
by a line break of its docstring) in the command's `--help` and in its group's list."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import typer.main

from tests.support.cli import run_cli
from twinhub.cli import app

ROOT = typer.main.get_command(app)


def commands(
    command: Any = None, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], Any]]:
    command = ROOT if command is None else command
    yield path, command
    if hasattr(command, "commands"):
        for name, sub in command.commands.items():
            if not sub.hidden:
                yield from commands(sub, (*path, name))


ALL = list(commands())
IDS = [" ".join(path) or "twinhub" for path, _ in ALL]


def words(text: str) -> str:
    """Text as the terminal shows it: Markdown's code marks gone, one space between words."""
    return " ".join(text.replace("`", "").split())


def shown(output: str) -> str:
    """A help screen without its frames, one space between words."""
    return words(re.sub(r"[│╭╮╰╯─]", " ", output))


@pytest.mark.parametrize(("path", "command"), ALL, ids=IDS)
def test_every_command_and_option_has_a_whole_sentence(path: tuple[str, ...], command: Any) -> None:
    help_text = words(command.help or "")
    assert help_text.endswith("."), (path, command.help)
    for param in command.params:
        if param.hidden or param.name == "help":
            continue
        text = words(getattr(param, "help", None) or "")
        assert text.endswith("."), (path, param.name, text)


@pytest.mark.parametrize(("path", "command"), ALL, ids=IDS)
def test_help_shows_every_text_whole(path: tuple[str, ...], command: Any) -> None:
    """On a terminal wide enough for any of them, each text is on one line: a line break
    of its docstring does not cut it (it would on a narrow one, mid-sentence)."""
    result = run_cli(*path, "--help", env={"COLUMNS": "2000"})
    assert result.returncode == 0, result.stderr
    lines = [shown(line) for line in result.stdout.splitlines()]
    wanted = [command.help or ""]
    wanted += [p.help for p in command.params if not p.hidden and getattr(p, "help", None)]
    if hasattr(command, "commands"):  # the list of its commands, each with its help
        wanted += [sub.help or "" for sub in command.commands.values() if not sub.hidden]
    for text in wanted:
        assert any(words(text) in line for line in lines), (path, text, result.stdout)
