"""Secret keys of 32 bytes, from settings or, outside production, from the data folder.

In development and test a key the operator did not configure is generated once, kept in
DATA_DIR with mode 0600 and reused on every start, so that PINs stay readable and issued
credentials stay verifiable across restarts. Production refuses to start without it.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from pydantic import SecretStr

from twinhub.logging import get_logger
from twinhub.settings import Environment

log = get_logger(__name__)


def load_key(
    configured: SecretStr | None,
    variable: str,
    file_name: str,
    *,
    data_dir: Path,
    environment: Environment,
) -> bytes:
    """The configured 64-hex-character key, or the development one under DATA_DIR."""
    if configured is not None:
        return bytes.fromhex(configured.get_secret_value())
    if environment is Environment.production:
        raise RuntimeError(f"{variable} is required in production")
    path = data_dir / file_name
    if not path.exists():
        _write_new_key(path)
        log.warning(
            f"generated a development key for {variable}; set it in production", path=str(path)
        )
    else:
        log.warning("using a development key from the data folder", path=str(path))
    key_hex = path.read_text().strip()
    if len(key_hex) != 64:
        raise RuntimeError(f"{path} does not hold a 64-hex-character key")
    return bytes.fromhex(key_hex)


def _write_new_key(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return  # another process wrote it a moment ago; read theirs
    with os.fdopen(fd, "w") as handle:
        handle.write(secrets.token_hex(32) + "\n")
