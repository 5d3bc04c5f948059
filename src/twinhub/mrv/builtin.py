"""Methodologies twinhub ships, kept as JSON documents beside this module so that what an
auditor reads is exactly what the oracle runs."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import orjson

from twinhub.kernel.errors import Problems
from twinhub.mrv.methodology import Methodology, compile_methodology, digest_of

CLEAN_COOKING = "clean-cooking-mecd"


def builtin_document(name: str) -> dict[str, Any]:
    text = resources.files("twinhub.mrv").joinpath("methodologies", f"{name}.json")
    return orjson.loads(text.read_bytes())


@cache
def builtin_methodology(name: str = CLEAN_COOKING) -> Methodology:
    problems = Problems()
    methodology = compile_methodology(builtin_document(name), problems)
    problems.raise_if_any(f"The built-in methodology {name} does not compile.")
    assert methodology is not None
    return methodology


def past_document(digest: str) -> dict[str, Any] | None:
    """A methodology twinhub shipped (now or before: `clean-cooking-mecd-1.0.0.json` is the
    document 1.0.0 reports were issued under) whose digest is `digest`, or None. What
    `verify-report` recomputes an old report with once its protocol moved on."""
    folder = resources.files("twinhub.mrv").joinpath("methodologies")
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".json"):
            document = orjson.loads(entry.read_bytes())
            if digest_of(document) == digest:
                return document  # type: ignore[no-any-return]
    return None
