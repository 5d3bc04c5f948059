"""The security context's start: the platform's keys, from SecuritySettings or, outside
production, from files generated under DATA_DIR."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from twinhub.security.keys import load_key
from twinhub.security.pins import PinCipher, load_pin_key
from twinhub.security.signing import Issuer
from twinhub.settings import Environment, SecuritySettings

ISSUER_KEY_FILE = "credential-issuer.key"


@dataclass(frozen=True)
class Keys:
    """The keys one process holds: each use derives its own key from `platform_key`."""

    platform_key: bytes  # the PIN key; webhook secrets derive theirs from it (HKDF)
    pin_cipher: PinCipher
    issuer: Issuer  # signs verifiable credentials


def load_keys(security: SecuritySettings, data_dir: Path, environment: Environment) -> Keys:
    """PIN_ENCRYPTION_KEY and CREDENTIAL_ISSUER_KEY, required in production."""
    pin_key = load_pin_key(security, data_dir, environment)
    issuer_key = load_key(
        security.credential_issuer_key,
        "CREDENTIAL_ISSUER_KEY",
        ISSUER_KEY_FILE,
        data_dir=data_dir,
        environment=environment,
    )
    return Keys(pin_key, PinCipher(pin_key), Issuer(issuer_key))
