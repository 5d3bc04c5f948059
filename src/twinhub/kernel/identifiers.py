"""Decentralised identifiers: the shape twinhub mints, and what it accepts from others.

twinhub mints `did:ixo:<kind>/<id>` (DESIGN.md: `did:ixo:entity/device-123`,
`did:ixo:protocol/clean-cooking`). Where it only *refers* to a DID (a controller, an
issuer), any W3C-shaped DID is accepted: `did:<method>:<method-specific-id>`, optionally
followed by a path, since ixo's own identifiers carry one.
"""

from __future__ import annotations

import base64
import re
import secrets
import unicodedata

DID_METHOD = "ixo"
_ID_CHAR = r"[A-Za-z0-9._\-]|%[0-9A-Fa-f]{2}"
DID_PATTERN = re.compile(
    rf"^did:[a-z0-9]+:(?:(?:{_ID_CHAR})*:)*(?:{_ID_CHAR})+(?:/(?:{_ID_CHAR})+)*$"
)
SLUG_PATTERN = re.compile(r"^[a-z0-9](?:[a-z0-9\-]{0,62}[a-z0-9])?$")
MAX_DID_LENGTH = 200


def is_did(value: object) -> bool:
    return (
        isinstance(value, str) and len(value) <= MAX_DID_LENGTH and bool(DID_PATTERN.match(value))
    )


def mint(kind: str, local_id: str | None = None) -> str:
    """A new twinhub DID of `kind`; a random id unless the caller chose one."""
    return f"did:{DID_METHOD}:{kind}/{local_id or new_local_id()}"


def new_local_id() -> str:
    """16 characters, lower-case letters and digits: typeable, and 80 bits of randomness."""
    # Ten random bytes in base32 are exactly 16 characters of a-z and 2-7, no padding.
    return base64.b32encode(secrets.token_bytes(10)).decode().lower()


def slugify(text: str) -> str:
    """'Clean Cooking (Kenya)' -> 'clean-cooking-kenya'."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")[:64].strip("-")


def customer_did(customer_id: str) -> str:
    """The DID a USSD customer holds in the registry (a stove's owner, a credit holder)."""
    return f"did:{DID_METHOD}:customer/{customer_id}"
