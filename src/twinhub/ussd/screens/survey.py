"""A household survey's questions: how many people eat from the stove, whether it is in
use, what else the household cooks with; and the thanks when they are answered."""

from __future__ import annotations

from twinhub.services.surveys import OTHER_FUELS
from twinhub.ussd.i18n import ENGLISH
from twinhub.ussd.screens.words import FIXED, N_, NAME_WIDTH, Wording, fit

# What else a household cooks with, in the order of the menu.
FUEL_WORDS = {
    # Translators: an answer to "What else do you cook with?"; 16 characters at most.
    "none": N_("Nothing else"),
    # Translators: an answer to "What else do you cook with?"; 16 characters at most.
    "charcoal": N_("Charcoal"),
    # Translators: an answer to "What else do you cook with?"; 16 characters at most.
    "wood": N_("Wood"),
    # Translators: an answer to "What else do you cook with?"; 16 characters at most.
    "kerosene": N_("Kerosene"),
    # Translators: an answer to "What else do you cook with?"; 16 characters at most.
    "lpg": N_("Gas (LPG)"),
    # Translators: an answer to "What else do you cook with?"; 16 characters at most.
    "other": N_("Other"),
}
assert tuple(FUEL_WORDS) == OTHER_FUELS


class SurveyScreens(Wording):
    """The survey's screens, each headed by the stove it asks about."""

    def __init__(self, language: str = ENGLISH) -> None:
        super().__init__(language)

    def _title(self, stove: str) -> str:
        # Translators: a survey screen's title, before a stove's name; 12 characters at most.
        return f"{self._('Survey')}: {fit(stove, NAME_WIDTH)}"

    def people(self, stove: str, low: int, high: int) -> str:
        # Translators: a survey question; 50 characters at most.
        question = self._("How many people eat from this stove?")
        # The stoves' "Enter {low} to {high}", with the survey's range.
        hint = self._catalogue.gettext("Enter {low} to {high}")
        hint = hint.format(**{**FIXED, "low": low, "high": high})
        return f"{self._title(stove)}\n{question}\n{hint}\n{self.footer}"

    def in_use(self, stove: str) -> str:
        # Translators: a survey question, answered Yes or No; 50 characters at most.
        question = self._("Is this stove in use?")
        # Translators: an answer to a survey question; 12 characters at most.
        yes = self._("Yes")
        # Translators: an answer to a survey question; 12 characters at most.
        no = self._("No")
        return f"{self._title(stove)}\n{question}\n{self._items(yes, no)}\n{self.footer}"

    def other_fuel(self, stove: str) -> str:
        # Translators: a survey question, answered from a list of fuels; 40 characters.
        question = self._("What else do you cook with?")
        words = [self._(FUEL_WORDS[fuel]) for fuel in OTHER_FUELS]
        return f"{self._title(stove)}\n{question}\n{self._items(*words)}\n{self.footer}"

    @property
    def done(self) -> str:
        # Translators: after the last survey answer; 60 characters at most.
        return self._page(self._("Survey"), self._("Thank you. Your answers are saved."))
