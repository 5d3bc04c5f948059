"""The words of every USSD screen, in the customer's language, grouped by menu. Each reply
fits 182 characters.

Wording lives here, apart from the navigation rules in `menu.py` and `flows/`, so that a
programme can adapt it without touching the flow: `words.py` holds what every screen is
built from (translation, shared pieces, widths), and one module per menu holds its screens.
"""

from __future__ import annotations

from datetime import tzinfo

from twinhub.ussd.i18n import ENGLISH, LANGUAGES
from twinhub.ussd.screens.account import AccountScreens
from twinhub.ussd.screens.claims import ClaimScreens
from twinhub.ussd.screens.closing import ClosingScreens
from twinhub.ussd.screens.notices import Notice
from twinhub.ussd.screens.status import StatusScreens
from twinhub.ussd.screens.stoves import StoveScreens
from twinhub.ussd.screens.survey import SurveyScreens
from twinhub.ussd.screens.welcome import WelcomeScreens
from twinhub.ussd.screens.words import (
    CLAIMS_PER_PAGE,
    MAX_SCREEN,
    MAX_TOKENS,
    MORE,
    STOVES_PER_PAGE,
    NoticeText,
    Plural,
    Wording,
    pages_of,
    short_id,
)

__all__ = [
    "CLAIMS_PER_PAGE",
    "MAX_SCREEN",
    "MAX_TOKENS",
    "MORE",
    "STOVES_PER_PAGE",
    "Content",
    "Notice",
    "NoticeText",
    "Plural",
    "all_contents",
    "pages_of",
    "short_id",
]


class Content:
    """The screens of one language, one object per menu. One per language is made at start."""

    def __init__(
        self,
        service_name: str = "twinhub",
        support_contact: str = "",
        language: str = ENGLISH,
        zone: tzinfo | None = None,
    ) -> None:
        self.words = Wording(language)
        self.code = self.words.code
        self.closing = ClosingScreens(self.code, service_name, support_contact)
        self.welcome = WelcomeScreens(self.code, service_name)
        self.account = AccountScreens(self.code)
        self.stoves = StoveScreens(self.code)
        self.claims = ClaimScreens(self.code)
        self.status = StatusScreens(self.code, zone)
        self.survey = SurveyScreens(self.code)

    def notice(self, notice: NoticeText) -> str:
        """A notice (a msgid from Notice, or a Plural) in this language."""
        return self.words.notice(notice)


def all_contents(
    service_name: str, support_contact: str, zone: tzinfo | None = None
) -> dict[str, Content]:
    """One Content per served language, made once at start."""
    return {code: Content(service_name, support_contact, code, zone) for code in LANGUAGES}
