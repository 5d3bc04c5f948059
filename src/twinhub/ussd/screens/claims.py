"""My Claims and My Credits: what the customer's reports became."""

from __future__ import annotations

from collections.abc import Sequence

from twinhub.services.stoves import ClaimLine
from twinhub.ussd.screens.words import (
    CLAIM_ROW,
    CREDIT_WORDS,
    MAX_TOKENS,
    REJECTION_WORDS,
    STATUS_WORDS,
    TOKEN_WIDTH,
    Wording,
    fit,
    list_title,
    short_id,
)


class ClaimScreens(Wording):
    """The screens under "My Claims" and "My Credits"."""

    @property
    def no_claims(self) -> str:
        # Translators: under "My Claims" when there are none; 30 characters at most.
        none = self._("No claims yet.")
        return self._page(self._("My Claims"), none)

    def claims(self, shown: Sequence[ClaimLine], page: int, pages: int) -> str:
        """One page of the customer's claims, newest first: short id, date, status."""
        if not shown:
            return self.no_claims
        rows = [
            fit(f"{short_id(c.id)} {c.submitted_at:%d/%m/%y} {self._state(c)}", CLAIM_ROW)
            for c in shown
        ]
        title = list_title(self._("My Claims"), page, pages)
        return f"{title}\n" + "\n".join(rows) + f"\n{self._more(page, pages)}{self.footer}"

    def _state(self, claim: ClaimLine) -> str:
        """A claim's state on its row; a rejected one says why, in a few words; an approved
        one whether its credits are issued yet."""
        if claim.reason is not None and claim.reason in REJECTION_WORDS:
            return self._(REJECTION_WORDS[claim.reason])
        if claim.credits is not None and claim.credits in CREDIT_WORDS:
            return self._(CREDIT_WORDS[claim.credits])  # approved: issued yet or not
        return self._word(claim.status, STATUS_WORDS)

    def credits(self, balances: Sequence[tuple[str, str]]) -> str:
        title = self._("My Credits")
        if not balances:
            # Translators: under "My Credits" when there are none; 30 characters at most.
            return self._page(title, self._("No credits yet."))
        shown = list(balances[:MAX_TOKENS])
        rows = [f"{fit(token, TOKEN_WIDTH)}: {amount}" for token, amount in shown]
        if len(balances) > MAX_TOKENS:
            more = len(balances) - MAX_TOKENS + 1
            # Translators: last row of a credit list cut short; 20 characters at most.
            rows[-1] = self._n("and {n} more", "and {n} more", more)
        return self._page(title, "\n".join(rows))
