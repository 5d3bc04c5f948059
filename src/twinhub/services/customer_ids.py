"""Customer IDs people can type on a keypad: 8 digits, the last a Luhn check digit.

The check digit catches a mistyped digit or a swap of neighbours before any database look-up.
"""

from __future__ import annotations

import secrets

CUSTOMER_ID_LENGTH = 8


def _luhn_digit(payload: str) -> int:
    total = 0
    for index, char in enumerate(reversed(payload)):
        digit = int(char)
        if index % 2 == 0:
            digit *= 2
            if digit > 9:
                digit -= 9
        total += digit
    return (10 - total % 10) % 10


def new_customer_id() -> str:
    """A random ID; its first digit is never 0, so it survives being read as a number."""
    payload = str(secrets.randbelow(9) + 1) + "".join(
        str(secrets.randbelow(10)) for _ in range(CUSTOMER_ID_LENGTH - 2)
    )
    return payload + str(_luhn_digit(payload))


def is_valid_customer_id(value: str) -> bool:
    return (
        len(value) == CUSTOMER_ID_LENGTH
        and value.isascii()
        and value.isdigit()
        and value[0] != "0"
        and _luhn_digit(value[:-1]) == int(value[-1])
    )
