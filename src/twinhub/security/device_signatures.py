"""Devices' Ed25519 signatures on their telemetry batches (issue 29 §6).

What is signed: the RFC 8785 (JCS) canonical bytes of the batch object exactly as sent,
`{"readings": [{"seq", "time", "values"}, ...]}` (security/jcs.py), with Ed25519 directly
(no pre-hash). The signature travels beside the batch, never inside it: over HTTP in the
`Device-Signature` header, over MQTT in the `device-signature` user property, written as
base58btc multibase (`z...`, like a credential's proofValue). Canonical bytes, not the bytes
on the wire, so a device may format its JSON as it likes and anyone holding the batch and
the device's public key checks it again later, without twinhub.

A device's public key is written as the multibase of an Ed25519 did:key (`z6Mk...`); a
`did:key:z6Mk...` is accepted too.
"""

from __future__ import annotations

from typing import Any

import base58
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from twinhub.security.jcs import CanonicalizationError, canonical
from twinhub.security.signing import did_key, multibase, public_key_of

SCHEME = "ed25519-jcs"  # a receipt's signature of this kind
HMAC_SCHEME = "hmac-sha256"  # an MQTT message's, under its device token's key


def public_key_multibase(value: str) -> str | None:
    """The device key `value` names (multibase or did:key), as stored; None when it is not
    an Ed25519 public key."""
    did = value if value.startswith("did:key:") else "did:key:" + value
    return did.removeprefix("did:key:") if public_key_of(did) is not None else None


def signed_bytes(batch: Any) -> bytes:
    """The bytes a device signs: the batch's JCS canonical form (raises
    CanonicalizationError for a value JSON cannot carry exactly)."""
    return canonical(batch)


def sign_batch(seed: bytes, batch: Any) -> str:
    """A device's signature of `batch` with its 32-byte Ed25519 seed (devices, simulator,
    tests)."""
    return multibase(Ed25519PrivateKey.from_private_bytes(seed).sign(signed_bytes(batch)))


def device_public_key(seed: bytes) -> str:
    """The public key (multibase) of a device's seed, as it is enrolled."""
    return did_key(Ed25519PrivateKey.from_private_bytes(seed).public_key()).removeprefix("did:key:")


def verify_batch(public_key: str, batch: Any, signature: str) -> bool:
    """Whether `signature` (multibase) is `public_key`'s over the batch's canonical bytes."""
    key = public_key_of("did:key:" + public_key)
    if key is None or not signature.startswith("z"):
        return False
    try:
        key.verify(base58.b58decode(signature[1:]), signed_bytes(batch))
    except (InvalidSignature, ValueError, CanonicalizationError):
        return False
    return True
