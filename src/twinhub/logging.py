"""Structured logs (structlog) with redaction, so no PIN, key or token can reach a log line.

Two layers of defence: values under secret-looking keys are replaced, and any string value
is scrubbed of URL credentials and bearer tokens. USSD `text` is treated as secret because
it accumulates everything the user typed, PINs included.
"""

from __future__ import annotations

import functools
import logging
import re
import sys
from collections.abc import MutableMapping
from typing import Any, TextIO

import structlog

REDACTED = "[redacted]"
_SECRET_KEY = re.compile(
    r"pin|password|passwd|secret|token|api_?key|authorization|cookie|^text$|ciphertext|private",
    re.IGNORECASE,
)
_URL_CREDENTIALS = re.compile(r"(?P<scheme>[a-z][a-z0-9+.\-]*://)[^/\s:@]*:[^/\s@]*@", re.I)
_BEARER = re.compile(r"(bearer\s+)[^\s,;]+", re.IGNORECASE)


def scrub(value: str) -> str:
    """Remove credentials embedded in free text (URLs, Authorization headers). Each pattern
    runs only where it could match (a URL's credentials end in "@"; no character but the
    ASCII letters of "bearer" matches them case-insensitively): the substitutions were most
    of a log line's cost, and most lines hold neither."""
    if "@" in value:
        value = _URL_CREDENTIALS.sub(r"\g<scheme>***@", value)
    if "bearer" in value.lower():
        value = _BEARER.sub(r"\1" + REDACTED, value)
    return value


@functools.lru_cache(maxsize=4096)
def _secret_key(key: str) -> bool:
    """Whether values under `key` are blanked (a log line's keys are few and repeat)."""
    return _SECRET_KEY.search(key) is not None


def redact(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: blank secret keys, scrub every string value."""
    event.pop("color_message", None)  # uvicorn's ANSI-coloured duplicate of the message
    for key, value in list(event.items()):
        if key != "event" and _secret_key(key):
            event[key] = REDACTED
        elif isinstance(value, str):
            event[key] = scrub(value)
    return event


def mask_phone(phone: str) -> str:
    """Keep a phone number recognisable to an operator without logging it whole."""
    return phone[:4] + "*" * max(len(phone) - 7, 0) + phone[-3:] if len(phone) > 7 else "***"


def configure_logging(level: str = "info", fmt: str = "auto", stream: TextIO | None = None) -> None:
    """Send structlog and stdlib logging (uvicorn, alembic) through one redacting pipeline."""
    stream = stream or sys.stderr
    use_json = fmt == "json" or (fmt == "auto" and not stream.isatty())
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        redact,
    ]
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if use_json
        else structlog.dev.ConsoleRenderer(colors=stream.isatty())
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*shared, structlog.stdlib.ExtraAdder()],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            redact,  # again: exception text is rendered only now
            renderer,
        ],
    )
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("uvicorn.access", "sqlalchemy.engine", "aiosqlite", "asyncio", "alembic"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,  # below the level: no processing cost at all
            *shared,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    return structlog.stdlib.get_logger(name)
