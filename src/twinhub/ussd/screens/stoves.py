"""My Stoves: the list, a stove's screen and the reports typed on it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from twinhub.services.stoves import COOKING, StoveView
from twinhub.ussd.screens.words import (
    N_,
    NAME_WIDTH,
    SERIAL_WIDTH,
    STATUS_WORDS,
    Wording,
    fit,
    list_title,
    stove_rows,
)


class StoveScreens(Wording):
    """The screens under "My Stoves"."""

    @property
    def no_stoves(self) -> str:
        # Translators: under "My Stoves" when the customer has none; 30 characters at most.
        none = self._("No stoves yet.")
        return self._page(self._("My Stoves"), none)

    @property
    def stove_gone(self) -> str:
        # Translators: the stove chosen earlier is no longer the customer's. 30 characters.
        return self._("Stove not found.") + "\n" + self.footer

    def stove_state(self, stove: StoveView, whole: bool = True) -> str:
        """The short status a stove's list row shows: its own, then its project's (`whole`),
        or its own alone where the row has no room for both."""
        status = self._word(stove.status, STATUS_WORDS)
        if not whole:
            return status
        if stove.project is None:
            # Translators: a stove's project state in the stove list; 12 characters at most.
            project = self._("no project")
        elif stove.project_verified:
            # Translators: a stove's project state in the stove list; 12 characters at most.
            project = self._("verified")
        else:
            # Translators: a stove's project state in the stove list; 12 characters at most.
            project = self._("unverified")
        return f"{status}, {project}"

    def stoves(self, shown: Sequence[StoveView], page: int, pages: int) -> str:
        """One page of the customer's stoves, numbered from 1 on every page."""
        if not shown:
            return self.no_stoves
        rows = stove_rows(shown, self.stove_state)
        title = list_title(self._("My Stoves"), page, pages)
        return f"{title}\n{rows}\n{self._more(page, pages)}{self.footer}"

    def stove_details(self, stove: StoveView) -> str:
        if stove.project is None:
            project = self._("no project")
        elif stove.project_verified:
            # Translators: a stove's project state on its own screen; 24 characters at most.
            project = self._("project verified")
        else:
            # Translators: a stove's project state on its own screen; 24 characters at most.
            project = self._("project not verified")
        serial = ""
        if stove.serial and stove.serial != stove.name:
            # Translators: the stove's serial number (16 characters) on its screen.
            serial = self._("Serial: {value}", value=fit(stove.serial, SERIAL_WIDTH)) + "\n"
        status = self._word(stove.status, STATUS_WORDS)
        # Translators: stove menu item and title; 20 characters at most.
        cooking = self._("Report cooking")
        # Translators: stove menu item and title; 20 characters at most.
        fuel = self._("Report fuel")
        return (
            f"{fit(stove.name, NAME_WIDTH)}\n{status}, {project}\n{serial}"
            f"{self._items(cooking, fuel)}\n{self.footer}"
        )

    def report_quantity(self, stove: StoveView, kind: str) -> str:
        if kind == COOKING:
            title = self._("Report cooking")
            # Translators: question of a cooking report; 40 characters at most.
            question = self._("How many meals were cooked?")
        else:
            title = self._("Report fuel")
            # Translators: question of a fuel report; 40 characters at most.
            question = self._("How many kg of fuel were bought?")
        # Translators: the range of the number to type ({low} is 1, {high} 1000).
        bounds = self._("Enter {low} to {high}")
        return f"{title}\n{fit(stove.name, NAME_WIDTH)}\n{question}\n{bounds}\n{self.footer}"

    def report_confirm(self, stove: StoveView, kind: str, quantity: int, month: date) -> str:
        """What the report says and which month it covers (the month just ended)."""
        name = fit(stove.name, NAME_WIDTH)
        if kind == COOKING:
            # Translators: confirmation; {month} is a month's name (11 characters), {stove}
            # a name of 24 characters. 70 characters at most.
            question = self._n(
                "Report {n} meal in {month} for {stove}?",
                "Report {n} meals in {month} for {stove}?",
                quantity,
                stove=name,
                month=self.month(month),
            )
        else:
            # Translators: confirmation; {month} is a month's name (11 characters), {stove}
            # a name of 24 characters. 70 characters at most.
            question = self._(
                "Report {n} kg of fuel in {month} for {stove}?",
                n=quantity,
                stove=name,
                month=self.month(month),
            )
        return f"{question}\n1. {self._confirm()}\n{self.footer}"

    def report_result(self, outcome: str, claim: str = "", month: date | None = None) -> str:
        """`outcome` is "sent" (then `claim` is its short id) or why the report was refused:
        notVerified, noCollection, inactive, gone, periodClaimed, outOfRange, refused;
        `month` is the month the report covers."""
        # Translators: why a report is refused (any other reason); 40 characters at most.
        refused = N_("Report not accepted. Try again later.")
        words = {
            # Translators: a report was accepted; {month} is a month's name (11 characters),
            # {claim} a 6-character id. 70 characters at most.
            "sent": N_("Report for {month} sent. Claim {claim} is pending."),
            # Translators: why a report is refused; 40 characters at most.
            "notVerified": N_("Project not verified yet."),
            # Translators: why a report is refused; 40 characters at most.
            "noCollection": N_("No open collection."),
            # Translators: why a report is refused; 40 characters at most.
            "inactive": N_("This stove is not active."),
            "gone": N_("Stove not found."),
            # Translators: the stove's report for {month} (a month's name, 11 characters) was
            # already sent, by phone or by the programme; 70 characters at most.
            "periodClaimed": N_("This stove's report for {month} was sent already."),
            # Translators: a reported number is outside what the programme allows; 60 at most.
            "outOfRange": N_("Report not accepted: the number is outside the allowed range."),
        }.get(outcome, refused)
        named = self.month(month) if month is not None else ""
        return self._(words, claim=claim, month=named) + "\n" + self.footer
