"""The USSD menus' languages: message catalogues, codes, and which language a session speaks.

Wording is English in the code (the msgids) and translated by gettext catalogues under
`locale/<code>/LC_MESSAGES/messages.po`, compiled to `messages.mo` beside them; both are
committed, so a fresh checkout serves every language with no build step (the standard
library reads .mo files; Babel is needed only to recompile, see tools/ussd_catalogues.py).
Catalogues are read once per process, never per request.

A language code that is not one of LANGUAGES (a stale preference, a typo in a setting)
falls back to the default without a word to the user: a menu in the wrong language is
better than no menu.
"""

from __future__ import annotations

import gettext
from functools import cache
from pathlib import Path

from twinhub.logging import get_logger

log = get_logger(__name__)

LOCALE_DIR = Path(__file__).parent / "locale"
DOMAIN = "messages"
ENGLISH = "en"
# Code -> the language's own name, as the Language menu lists it (never translated: a
# reader finds their language by its own name). Names keep to the GSM-7 alphabet.
LANGUAGES: dict[str, str] = {
    "en": "English",
    "fr": "Francais",
    "sw": "Kiswahili",
    "ny": "Chinyanja",
    "bem": "Ichibemba",
}
# Other spellings of the same languages (ISO 639-2/3 codes, common names) mapped to ours.
ALIASES: dict[str, str] = {
    "eng": "en",
    "fra": "fr",
    "fre": "fr",
    "swa": "sw",
    "swh": "sw",
    "nya": "ny",
    "chichewa": "ny",
    "nyanja": "ny",
    "bemba": "bem",
}


def known_language(code: str | None) -> str | None:
    """Our code for `code` ("sw", "SW", "sw-KE", "swa" -> "sw"), or None if not served."""
    if not code:
        return None
    clean = code.strip().lower().replace("_", "-")
    for candidate in (clean, clean.split("-")[0]):
        candidate = ALIASES.get(candidate, candidate)
        if candidate in LANGUAGES:
            return candidate
    return None


def choose_language(code: str | None, default: str) -> str:
    """`code` if we serve it, else `default` (itself checked, else English): silent."""
    return known_language(code) or known_language(default) or ENGLISH


@cache
def translations(code: str) -> gettext.NullTranslations:
    """The compiled catalogue of `code`, read once; English (the msgids) needs none."""
    if code == ENGLISH or code not in LANGUAGES:
        return gettext.NullTranslations()
    path = LOCALE_DIR / code / "LC_MESSAGES" / f"{DOMAIN}.mo"
    try:
        with path.open("rb") as handle:
            return gettext.GNUTranslations(handle)
    except OSError:
        log.error("ussd catalogue missing; English shown instead", language=code)
        return gettext.NullTranslations()


class ServiceDefaults:
    """The default language of each USSD service code (USSD_DEFAULT_LANGUAGES, in the form
    "*384*1#=en,*384*2#=sw"), and the global one (USSD_DEFAULT_LANGUAGE) for all others.
    Unknown codes in the setting are logged once at start and ignored."""

    def __init__(self, mapping: str, default: str) -> None:
        self.default = choose_language(default, ENGLISH)
        if known_language(default) is None:
            log.warning("USSD_DEFAULT_LANGUAGE is not a served language", value=default[:16])
        self._by_code: dict[str, str] = {}
        for item in mapping.split(","):
            code, _, language = item.strip().partition("=")
            if not item.strip():
                continue
            known = known_language(language)
            if not code.strip() or known is None:
                log.warning("USSD_DEFAULT_LANGUAGES entry ignored", entry=item.strip()[:40])
                continue
            self._by_code[code.strip()] = known

    def for_service(self, service_code: str) -> str:
        return self._by_code.get(service_code, self.default)
