"""Ed25519 signatures on W3C verifiable credentials (Data Integrity, `eddsa-jcs-2022`).

Why these choices: a `did:key` issuer carries its own public key, so anyone can check a
credential without asking twinhub, and an old credential still verifies after the key is
rotated. `eddsa-jcs-2022` canonicalises JSON with RFC 8785 (JCS, security/jcs.py), which
needs no JSON-LD processing. Signing follows the cryptosuite: SHA-256 of the canonical proof
options, then SHA-256 of the canonical document without its proof, concatenated and signed;
the signature is the proof's base58btc multibase `proofValue`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import base58
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from twinhub.security.jcs import CanonicalizationError, canonical

ED25519_MULTICODEC = b"\xed\x01"
PROOF_TYPE = "DataIntegrityProof"
CRYPTOSUITE = "eddsa-jcs-2022"


def multibase(data: bytes) -> str:
    return "z" + base58.b58encode(data).decode()


def did_key(public_key: Ed25519PublicKey) -> str:
    raw = public_key.public_bytes(Encoding.Raw, PublicFormat.Raw)
    return "did:key:" + multibase(ED25519_MULTICODEC + raw)


def public_key_of(did: str) -> Ed25519PublicKey | None:
    """The key a `did:key` Ed25519 DID (or one of its verification methods) names."""
    identifier = did.split("#", 1)[0].removeprefix("did:key:")
    if identifier == did.split("#", 1)[0] or not identifier.startswith("z"):
        return None
    try:
        decoded = base58.b58decode(identifier[1:])
    except ValueError:
        return None
    if len(decoded) != 34 or not decoded.startswith(ED25519_MULTICODEC):
        return None
    return Ed25519PublicKey.from_public_bytes(decoded[2:])


class Issuer:
    """The platform's signing identity: an Ed25519 key and the `did:key` it makes."""

    def __init__(self, seed: bytes) -> None:
        self._key = Ed25519PrivateKey.from_private_bytes(seed)
        self.did = did_key(self._key.public_key())
        self.verification_method = f"{self.did}#{self.did.removeprefix('did:key:')}"

    def did_document(self) -> dict[str, Any]:
        """What a resolver of the issuer's did:key would answer."""
        key = self.did.removeprefix("did:key:")
        return {
            "@context": ["https://www.w3.org/ns/did/v1", "https://w3id.org/security/multikey/v1"],
            "id": self.did,
            "verificationMethod": [
                {
                    "id": self.verification_method,
                    "type": "Multikey",
                    "controller": self.did,
                    "publicKeyMultibase": key,
                }
            ],
            "assertionMethod": [self.verification_method],
            "authentication": [self.verification_method],
        }

    def sign(self, document: dict[str, Any], created: str) -> dict[str, Any]:
        """The document with a Data Integrity proof by this issuer."""
        options = {
            "type": PROOF_TYPE,
            "cryptosuite": CRYPTOSUITE,
            "created": created,
            "verificationMethod": self.verification_method,
            "proofPurpose": "assertionMethod",
        }
        signature = self._key.sign(_hash_data(document, options))
        return {**document, "proof": {**options, "proofValue": multibase(signature)}}


@dataclass(frozen=True)
class Verification:
    verified: bool
    problem: str | None = None
    issuer: str | None = None


def verify(credential: dict[str, Any]) -> Verification:
    """Check a credential's proof; a changed byte anywhere in it fails the check."""
    proof = credential.get("proof")
    if not isinstance(proof, dict):
        return Verification(False, "the credential has no proof")
    if proof.get("type") != PROOF_TYPE or proof.get("cryptosuite") != CRYPTOSUITE:
        return Verification(False, f"the proof is not a {PROOF_TYPE} of {CRYPTOSUITE}")
    if proof.get("proofPurpose") != "assertionMethod":
        return Verification(False, "the proof's purpose is not assertionMethod")
    method = proof.get("verificationMethod")
    public_key = public_key_of(method) if isinstance(method, str) else None
    if public_key is None:
        return Verification(False, "the verification method is not an Ed25519 did:key")
    issuer = credential.get("issuer")
    issuer_id = issuer.get("id") if isinstance(issuer, dict) else issuer
    if not isinstance(issuer_id, str) or method.split("#", 1)[0] != issuer_id:
        return Verification(False, "the proof was not made by the credential's issuer")
    value = proof.get("proofValue")
    if not isinstance(value, str) or not value.startswith("z"):
        return Verification(False, "the proof value is not base58btc multibase")
    try:
        signature = base58.b58decode(value[1:])
    except ValueError:
        return Verification(False, "the proof value is not base58btc multibase")
    document = {k: v for k, v in credential.items() if k != "proof"}
    options = {k: v for k, v in proof.items() if k != "proofValue"}
    try:
        public_key.verify(signature, _hash_data(document, options))
    except (InvalidSignature, CanonicalizationError):
        return Verification(False, "the signature does not match the credential", issuer_id)
    return Verification(True, None, issuer_id)


def _hash_data(document: dict[str, Any], options: dict[str, Any]) -> bytes:
    config = {**options, "@context": document.get("@context")}
    return hashlib.sha256(canonical(config)).digest() + hashlib.sha256(canonical(document)).digest()
