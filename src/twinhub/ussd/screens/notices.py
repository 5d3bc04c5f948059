"""One-line notices above a re-shown screen."""

from __future__ import annotations

from twinhub.ussd.screens.words import N_, Filled, Plural


class Notice:
    """One-line messages put above a re-shown screen after a wrong answer: msgids, which
    the screen's Content translates (Content.notice). 45 characters at most each."""

    # Translators: a notice line above a screen; 45 characters at most.
    invalid_choice = N_("Invalid choice.")
    # Translators: a notice line above a screen; 45 characters at most.
    bad_name = N_("Enter 2 to 40 letters.")
    # Translators: a notice line above a screen; 45 characters at most.
    pin_mismatch = N_("PINs did not match. Try again.")
    # Translators: a notice line above a screen; 45 characters at most.
    same_pin = N_("New PIN must differ from the old one.")
    # Translators: a notice line above a screen; 45 characters at most.
    pin_changed = N_("PIN changed.")
    # Translators: a notice line above a screen; 45 characters at most.
    bad_customer_id = N_("Check the customer ID and try again.")
    # Translators: a notice line above a screen; 45 characters at most.
    unknown_customer = N_("Customer ID not found.")
    # Translators: a notice line above a screen; 45 characters at most.
    wrong_id_or_pin = N_("Wrong customer ID or PIN.")
    # Translators: a notice line above a screen; 45 characters at most.
    no_phone_account = N_("No account for this phone.")
    # Translators: a notice line above a screen; 45 characters at most.
    phone_registered = N_("This phone has an account. Log in.")
    # Translators: a notice line above a screen; 45 characters at most.
    pin_digits = N_("PIN must be {digits} digits.")
    # Translators: a notice line above a screen; 45 characters at most.
    pin_too_easy = N_("PIN too easy. Avoid repeats and sequences.")
    # Translators: a notice line above a screen; 45 characters at most.
    quantity_digits = N_("Enter digits only, e.g. 5.")
    # Translators: a notice line above a screen; 45 characters at most.
    quantity_range = N_("Enter a number from {low} to {high}.")
    # Translators: shown above the menu after a new language is chosen, in that language.
    language_set = N_("Language changed.")

    @staticmethod
    def wrong_pin(attempts_left: int) -> Plural:
        # Translators: a notice line above the PIN screen; 45 characters at most.
        return Plural(
            "Wrong PIN. {n} attempt left.", "Wrong PIN. {n} attempts left.", attempts_left
        )

    @staticmethod
    def out_of_range(low: int, high: int) -> Filled:
        """`quantity_range` with a range of the moment (a survey's household sizes)."""
        return Filled(Notice.quantity_range, (("low", low), ("high", high)))
