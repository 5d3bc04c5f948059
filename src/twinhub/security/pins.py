"""PINs encrypted at rest with AES-256-GCM, compared in constant time.

The seed asks for encryption (not hashing) under `PIN_ENCRYPTION_KEY`. Each ciphertext is
`version byte | 12-byte random nonce | ciphertext+tag`, and is bound to its owner through the
associated data, so a ciphertext copied onto another account does not decrypt.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import os
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from twinhub.security.keys import load_key
from twinhub.settings import Environment, SecuritySettings

PIN_LENGTH = 5
_FORMAT_V1 = b"\x01"
_NONCE_BYTES = 12
DEV_KEY_FILE = "pin-encryption.key"
_SHA256_BLOCK = 64


class PinCipher:
    """Encrypts PINs for one purpose (`context`), e.g. an account or a session's pending PIN."""

    def __init__(self, key: bytes) -> None:
        if len(key) != 32:
            raise ValueError("the PIN key must be 32 bytes (AES-256)")
        self._aead = AESGCM(key)
        # A separate key for digests, so a digest never reveals anything about the AES key.
        digest_key = hmac.digest(key, b"twinhub digest v1", hashlib.sha256)
        # HMAC's keyed inner and outer hash states (RFC 2104: the key padded to a block,
        # XOR ipad / opad), made once and copied per digest: a USSD request takes one or
        # two digests, hmac.digest re-derives the states each time, and hmac.HMAC's copy
        # costs four Python calls per digest.
        padded = digest_key.ljust(_SHA256_BLOCK, b"\x00")
        self._inner = hashlib.sha256(bytes(k ^ 0x36 for k in padded))
        self._outer = hashlib.sha256(bytes(k ^ 0x5C for k in padded))

    def encrypt(self, pin: str, context: str) -> bytes:
        nonce = os.urandom(_NONCE_BYTES)
        return _FORMAT_V1 + nonce + self._aead.encrypt(nonce, pin.encode(), context.encode())

    def digest(self, text: str, context: str) -> str:
        """A keyed digest (HMAC-SHA256) of text that may hold PIN digits, for comparing it
        later without keeping it: unkeyed, the 100,000 five-digit PINs would be guessed at
        once."""
        inner = self._inner.copy()
        inner.update(f"{context}\x00{text}".encode())
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.digest()[:16].hex()

    def matches(self, ciphertext: bytes, candidate: str, context: str) -> bool:
        """True when `candidate` is the PIN; a damaged or foreign ciphertext never matches."""
        if ciphertext[:1] != _FORMAT_V1:
            return False
        nonce, body = ciphertext[1 : 1 + _NONCE_BYTES], ciphertext[1 + _NONCE_BYTES :]
        try:
            stored = self._aead.decrypt(nonce, body, context.encode())
        except InvalidTag:
            return False
        return hmac.compare_digest(stored, candidate.encode())


def load_pin_key(security: SecuritySettings, data_dir: Path, environment: Environment) -> bytes:
    """The configured key; in development and test, one generated once under DATA_DIR."""
    return load_key(
        security.pin_encryption_key,
        "PIN_ENCRYPTION_KEY",
        DEV_KEY_FILE,
        data_dir=data_dir,
        environment=environment,
    )


def pin_problem(pin: str, phone_number: str | None = None) -> str | None:
    """Why a new PIN is refused, in words that fit a USSD screen; None when it is acceptable."""
    if len(pin) != PIN_LENGTH or not pin.isascii() or not pin.isdigit():
        return f"PIN must be {PIN_LENGTH} digits."
    digits = [int(c) for c in pin]
    steps = {b - a for a, b in itertools.pairwise(digits)}
    too_easy = (
        len(set(pin)) < 3  # 11111, 12121, 11222
        or steps in ({1}, {-1})  # 12345, 98765
        or (phone_number is not None and phone_number.endswith(pin))
    )
    return "PIN too easy. Avoid repeats and sequences." if too_easy else None
