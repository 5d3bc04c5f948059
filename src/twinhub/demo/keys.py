"""The demo's role keys: a proponent, a verifier and a registry, each an Ed25519 did:key
whose seed and API key are written as files under the data folder (readable by their owner
alone), never printed. The signing key file has the shape `twinhub keys new` writes, so
the CLI's signed steps (`twinhub period submit --key FILE`, ...) take it as it is.

A second run reads the files it wrote: the same DIDs, and the same API keys while they
still authenticate (a new one replaces a revoked or unknown key)."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

import orjson

from twinhub.platform import Platform
from twinhub.security.signing import Issuer

KEY_FOLDER = "demo-keys"
# Each role key's API roles: the workflow role, and what the holder also does over the API
# (the proponent computes drafts and uploads evidence as a writer; the others read).
ROLE_GRANTS = {
    "proponent": ["proponent", "writer", "reader"],
    "verifier": ["verifier", "reader"],
    "registry": ["registry", "reader"],
}


@dataclass(frozen=True)
class RoleKey:
    role: str
    signer: Issuer
    key_file: Path  # the signing key (seed), as `twinhub keys new` writes it
    api_key_file: Path  # the bearer token of the role's API key
    api_key: str
    created: bool  # this run made the key (or its API key)

    @property
    def did(self) -> str:
        return self.signer.did


def _write_private(path: Path, content: bytes) -> None:
    """Write `content` readable by the owner alone (0600), replacing what was there."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as out:
        out.write(content)
    path.chmod(0o600)


def _signer(path: Path) -> tuple[Issuer, bool]:
    """The key stored at `path`, or a new one written there; (signer, made now)."""
    if path.is_file():
        stored = orjson.loads(path.read_bytes())
        return Issuer(bytes.fromhex(stored["seed"])), False
    seed = secrets.token_bytes(32)
    signer = Issuer(seed)
    _write_private(path, orjson.dumps({"type": "Ed25519", "did": signer.did, "seed": seed.hex()}))
    return signer, True


async def role_key(platform: Platform, role: str) -> RoleKey:
    """The demo's key for `role` (proponent, verifier, registry), made once."""
    folder = platform.settings.storage.data_dir / KEY_FOLDER
    key_file, api_key_file = folder / f"{role}.key", folder / f"{role}.api-key"
    signer, made = _signer(key_file)
    token = api_key_file.read_text().strip() if api_key_file.is_file() else ""
    holder = await platform.api_keys.authenticate(token) if token else None
    if holder is None or holder.did != signer.did:
        token, _ = await platform.api_keys.create(signer.did, ROLE_GRANTS[role], f"demo {role}")
        _write_private(api_key_file, token.encode())
        made = True
    return RoleKey(role, signer, key_file, api_key_file, token, made)
