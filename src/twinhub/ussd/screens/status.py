"""Stove Status: is my stove on, when it cooked, and reporting a problem with it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, tzinfo

from twinhub.services.stove_care import PROBLEM_KINDS, StoveHealth
from twinhub.services.stoves import StoveView
from twinhub.ussd.i18n import ENGLISH
from twinhub.ussd.screens.words import (
    NAME_WIDTH,
    PROBLEM_WORDS,
    Wording,
    fit,
    list_title,
    stove_rows,
)


class StatusScreens(Wording):
    """The screens under "Stove Status"."""

    def __init__(self, language: str = ENGLISH, zone: tzinfo | None = None) -> None:
        super().__init__(language)
        self.zone = zone  # where the customer's clock is, for "last cooked" times

    def _when(self, moment: datetime) -> str:
        """'23/11 08:15' this year, '23/11/2025' before: short, and read the same way in
        every language of the menus (day first)."""
        local = moment.astimezone(self.zone) if self.zone else moment
        now = datetime.now(local.tzinfo)
        return f"{local:%d/%m %H:%M}" if local.year == now.year else f"{local:%d/%m/%Y}"

    def stove_pick(self, shown: Sequence[StoveView], page: int, pages: int) -> str:
        """The customer's stoves to pick one for Stove Status (several stoves only)."""
        title = list_title(self._("Stove Status"), page, pages)
        rows = stove_rows(shown, None)
        return f"{title}\n{rows}\n{self._more(page, pages)}{self.footer}"

    @property
    def no_stove_status(self) -> str:
        return self._page(self._("Stove Status"), self._("No stoves yet."))

    def stove_status(self, stove: StoveView, health: StoveHealth) -> str:
        if health.online:
            # Translators: Stove Status line: the stove sent data just now. 40 characters.
            online = self._("Online now")
        elif health.last_seen is not None:
            # Translators: Stove Status line; {when} is "23/11 08:15" or "23/11/2025". 40 chars.
            online = self._("Offline. Seen {when}", when=self._when(health.last_seen))
        else:
            # Translators: Stove Status line: the stove never sent data. 40 characters.
            online = self._("No data from stove yet")
        if health.last_cooked is not None:
            # Translators: Stove Status line; {when} is "23/11 08:15" or "23/11/2025". 40 chars.
            cooked = self._("Last cooked {when}", when=self._when(health.last_cooked))
        else:
            # Translators: Stove Status line: no cooking recorded. 40 characters.
            cooked = self._("No cooking recorded")
        # Translators: Stove Status line; {n} cooking sessions this calendar month and
        # {kwh} their energy, as "3.4". 40 characters at most.
        month = self._n(
            "Cooked {n} time this month, {kwh} kWh",
            "Cooked {n} times this month, {kwh} kWh",
            health.month_sessions,
            kwh=f"{health.month_kwh:.1f}",
        )
        # Translators: Stove Status item and title; opens the list of problems. 20 chars.
        report = self._("Report a problem")
        name = fit(stove.name, NAME_WIDTH)
        return f"{name}\n{online}\n{cooked}\n{month}\n1. {report}\n{self.footer}"

    @property
    def problem_kinds(self) -> str:
        words = [self._(PROBLEM_WORDS[kind]) for kind in PROBLEM_KINDS]
        return self._menu(self._("Report a problem"), *words)

    def problem_confirm(self, stove: StoveView, kind: str) -> str:
        # Translators: confirmation; {problem} is a problem kind, {stove} a name of 24.
        question = self._(
            "Report {problem} for {stove}?",
            problem=self._(PROBLEM_WORDS[kind]),
            stove=fit(stove.name, NAME_WIDTH),
        )
        return f"{question}\n1. {self._confirm()}\n{self.footer}"

    def problem_sent(self, reference: str) -> str:
        # Translators: after a problem report; {ref} is 8 characters. 90 characters at most.
        words = self._("Problem reported. Ref {ref}. An agent will contact you.", ref=reference)
        return f"{words}\n{self.footer}"
