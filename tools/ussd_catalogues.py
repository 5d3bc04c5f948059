"""The USSD menus' message catalogues: extract msgids from the code, merge them into each
language's .po, compile the .mo files the gateway reads (Babel does the work).

    python tools/ussd_catalogues.py            # extract + update + compile (after edits)
    python tools/ussd_catalogues.py compile    # only recompile .po -> .mo (a translator's fix)
    python tools/ussd_catalogues.py check      # exit 1 if anything is stale (CI, tests)

Sources of msgids: the modules of src/twinhub/ussd/screens/ (`self._`, `self._n`, `N_`, `Plural`).
Comments starting "Translators:" above a msgid go into the catalogues.
"""

from __future__ import annotations

import io
import sys
from datetime import UTC, datetime
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.extract import extract_from_file
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po, write_po

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from twinhub.ussd.i18n import DOMAIN, ENGLISH, LANGUAGES, LOCALE_DIR  # noqa: E402

SCREENS = ROOT / "src/twinhub/ussd/screens"
# In the order the screens were first written in, so that the catalogues keep their order.
SOURCES = [
    SCREENS / f"{name}.py"
    for name in (
        "words",
        "closing",
        "welcome",
        "account",
        "stoves",
        "claims",
        "status",
        "notices",
        "survey",
    )
]
KEYWORDS = {"_": None, "N_": None, "_n": (1, 2), "Plural": (1, 2)}
TEMPLATE = LOCALE_DIR / f"{DOMAIN}.pot"
HEADER = "twinhub USSD menus. Translators: see docs/ussd.md, section 'USSD languages'."
STAMP = datetime(2026, 11, 23, tzinfo=UTC)


def template() -> Catalog:
    catalog = Catalog(
        project="twinhub",
        version="0.1.0",
        header_comment=f"# {HEADER}",
        fuzzy=False,
        creation_date=STAMP,  # fixed, so that the template changes only with its msgids
    )
    for source in SOURCES:
        for line, message, comments, _ in extract_from_file(
            "python", source, keywords=KEYWORDS, comment_tags=("Translators:",)
        ):
            where = [(str(source.relative_to(ROOT)), line)]
            held = catalog.get(message[0] if isinstance(message, tuple) else message)
            if held is not None:  # the same words in several places: one entry
                held.locations.extend(where)
                held.auto_comments.extend(c for c in comments if c not in held.auto_comments)
                continue
            catalog.add(message, locations=where, auto_comments=comments)
    return catalog


def po_path(code: str) -> Path:
    return LOCALE_DIR / code / "LC_MESSAGES" / f"{DOMAIN}.po"


def render_po(catalog: Catalog) -> bytes:
    out = io.BytesIO()
    # No line numbers: an edit elsewhere in the screens leaves the catalogues unchanged.
    write_po(out, catalog, width=100, sort_output=False, include_lineno=False)
    return out.getvalue()


def render_mo(catalog: Catalog) -> bytes:
    out = io.BytesIO()
    write_mo(out, catalog, use_fuzzy=False)
    return out.getvalue()


def read(code: str) -> Catalog:
    with po_path(code).open("rb") as handle:
        return read_po(handle, locale=None, domain=DOMAIN)


def translated_codes() -> list[str]:
    return [code for code in LANGUAGES if code != ENGLISH]


def update() -> None:
    pot = template()
    TEMPLATE.write_bytes(render_po(pot))
    for code in translated_codes():
        catalog = read(code)
        catalog.update(pot, no_fuzzy_matching=True, update_header_comment=False)
        po_path(code).write_bytes(render_po(catalog))


def compile_all() -> None:
    for code in translated_codes():
        po_path(code).with_suffix(".mo").write_bytes(render_mo(read(code)))


def stale() -> list[str]:
    """What is out of date: the template against the code, each .mo against its .po, and
    any msgid of the template a catalogue lacks or leaves untranslated."""
    problems = []
    pot = template()
    if not TEMPLATE.exists() or TEMPLATE.read_bytes() != render_po(pot):
        problems.append(f"{TEMPLATE.name} differs from the msgids in the code")
    for code in translated_codes():
        catalog = read(code)
        mo = po_path(code).with_suffix(".mo")
        if not mo.exists() or mo.read_bytes() != render_mo(catalog):
            problems.append(f"{code}: {mo.name} differs from {DOMAIN}.po")
        for message in pot:
            if not message.id:
                continue
            held = catalog.get(message.id)
            strings = held.string if held else None
            if isinstance(strings, tuple | list):
                strings = all(strings) and strings
            if held is None or not strings or held.fuzzy:
                problems.append(f"{code}: no translation of {message.id!r}")
    return problems


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "all"
    if command == "check":
        problems = stale()
        print("\n".join(problems) or "catalogues up to date")
        return 1 if problems else 0
    if command in ("all", "update"):
        update()
    if command in ("all", "compile"):
        compile_all()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
