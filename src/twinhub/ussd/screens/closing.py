"""The closing messages (END): errors, time-outs, lock-outs and goodbye."""

from __future__ import annotations

from twinhub.ussd.i18n import ENGLISH
from twinhub.ussd.screens.words import Wording


class ClosingScreens(Wording):
    """The screens that end a session, from any menu."""

    def __init__(
        self, language: str = ENGLISH, service_name: str = "twinhub", support_contact: str = ""
    ) -> None:
        super().__init__(language)
        self.service_name = service_name
        self.support_contact = support_contact

    @property
    def invalid_request(self) -> str:
        # Translators: END screen for a malformed request; 80 characters at most.
        return self._("Invalid input. Please try again.")

    @property
    def unavailable(self) -> str:
        # Translators: END screen during an outage; 80 characters at most.
        return self._("Service temporarily unavailable. Please try again later.")

    @property
    def expired(self) -> str:
        # Translators: END screen after a long pause; 80 characters at most.
        return self._("Your session has expired. Please dial again.")

    @property
    def ended(self) -> str:
        # Translators: END screen for a request after the end; 80 characters at most.
        return self._("This session has ended. Please dial again.")

    @property
    def logged_out(self) -> str:
        # Translators: END screen after "Log Out"; 80 characters at most.
        return self._("You have logged out. Goodbye.")

    @property
    def rate_limited(self) -> str:
        # Translators: END screen when a gateway sends too much; 80 characters at most.
        return self._("Too many requests. Please try again later.")

    @property
    def goodbye(self) -> str:
        # Translators: the last screen after "*"; {service} is the programme's name.
        return self._("Thank you for using {service}. Goodbye.", service=self.service_name)

    def _call(self) -> str:
        if not self.support_contact:
            return ""
        # Translators: added after a lock-out message when a support number is set.
        return " " + self._("Call {contact}.", contact=self.support_contact)

    def locked(self, attempts: int, seconds: int = 0) -> str:
        if seconds:
            # Translators: {n} wrong PINs; {duration} as "2 minutes". 120 characters.
            text = self._n(
                "Your account is locked for {duration} after {n} wrong PIN. Try later.",
                "Your account is locked for {duration} after {n} wrong PINs. Try later.",
                attempts,
                duration=self._duration(seconds),
            )
        else:
            # Translators: END screen; {n} wrong PINs. 140 characters at most.
            text = self._n(
                "Your account is locked after {n} wrong PIN. Try later.",
                "Your account is locked after {n} wrong PINs. Try later.",
                attempts,
            )
        return text + self._call()

    def phone_locked(self, seconds: int) -> str:
        # Translators: {duration} as "2 minutes". 120 characters at most.
        text = self._(
            "Too many wrong PINs from this phone. Try again in {duration}.",
            duration=self._duration(seconds),
        )
        return text + self._call()

    def _duration(self, seconds: int) -> str:
        """'45 seconds', '2 minutes', '1 hour': a lock-out's length in a few characters."""
        if seconds < 60:
            # Translators: a lock-out length, put into the lock-out messages; 12 characters.
            return self._n("{n} second", "{n} seconds", seconds)
        minutes = (seconds + 59) // 60
        if minutes < 60:
            # Translators: a lock-out length, put into the lock-out messages; 12 characters.
            return self._n("{n} minute", "{n} minutes", minutes)
        hours = (minutes + 59) // 60
        # Translators: a lock-out length, put into the lock-out messages; 12 characters.
        return self._n("{n} hour", "{n} hours", hours)
