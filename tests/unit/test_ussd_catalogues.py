"""The USSD message catalogues agree with the code and with each other: the template holds
every msgid of ussd/screens/, every language translates every msgid, and each committed .mo is
exactly what its .po compiles to (tools/ussd_catalogues.py says how to refresh them)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))

import ussd_catalogues
from twinhub.ussd.i18n import LANGUAGES, translations


def test_catalogues_are_up_to_date() -> None:
    assert ussd_catalogues.stale() == []


def test_every_placeholder_survives_translation() -> None:
    """A translation that drops or renames a {placeholder} would show wrong numbers."""
    for code in ussd_catalogues.translated_codes():
        for message in ussd_catalogues.read(code):
            if not message.id:
                continue
            ids = message.id if isinstance(message.id, tuple) else (message.id,)
            strings = message.string if isinstance(message.string, tuple) else (message.string,)
            wanted = {part.split("}")[0] for part in ids[-1].split("{")[1:]}
            for string in strings:
                found = {part.split("}")[0] for part in string.split("{")[1:]}
                assert found <= wanted | {"n"}, (code, message.id, string)


def test_catalogues_are_read_once() -> None:
    for code in LANGUAGES:
        assert translations(code) is translations(code)
