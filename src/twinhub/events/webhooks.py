"""Webhook subscriptions: their secrets, the Standard Webhooks signature, and the URL
policy that keeps receivers off the platform's own networks (no server-side request
forgery).

Signing follows the Standard Webhooks specification (standardwebhooks.com): the secret is
`whsec_` + base64 of 32 random bytes; a delivery carries `webhook-id` (the event's stable
id), `webhook-timestamp` (Unix seconds of the attempt) and `webhook-signature`
(`v1,` + base64 of HMAC-SHA256 over `{id}.{timestamp}.{body}` keyed with the decoded
secret). The secret is needed to sign, so it is stored encrypted (AES-256-GCM under a key
derived from the platform's PIN_ENCRYPTION_KEY, bound to the subscription), never hashed,
and shown once, when the subscription is made.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import ipaddress
import os
import secrets
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from twinhub.settings import WebhookSettings, setting_name

SECRET_PREFIX = "whsec_"  # noqa: S105 - the format marker, not a secret
_FORMAT_V1 = b"\x01"
_NONCE_BYTES = 12
MAX_URL_LENGTH = 2000
IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def sign(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """The `webhook-signature` header value for one attempt."""
    key = base64.b64decode(secret.removeprefix(SECRET_PREFIX))
    signed = f"{message_id}.{timestamp}.".encode() + body
    digest = hmac.new(key, signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


class SecretBox:
    """Encrypts webhook secrets at rest; a ciphertext opens only for its own subscription."""

    def __init__(self, platform_key: bytes) -> None:
        derived = HKDF(
            algorithm=hashes.SHA256(), length=32, salt=None, info=b"twinhub webhook secrets v1"
        ).derive(platform_key)
        self._aead = AESGCM(derived)

    def seal(self, secret: str, webhook_id: str) -> bytes:
        nonce = os.urandom(_NONCE_BYTES)
        return _FORMAT_V1 + nonce + self._aead.encrypt(nonce, secret.encode(), webhook_id.encode())

    def open(self, ciphertext: bytes, webhook_id: str) -> str:
        if ciphertext[:1] != _FORMAT_V1:
            raise ValueError("unknown webhook secret format")
        nonce, body = ciphertext[1 : 1 + _NONCE_BYTES], ciphertext[1 + _NONCE_BYTES :]
        try:
            return self._aead.decrypt(nonce, body, webhook_id.encode()).decode()
        except InvalidTag:
            raise ValueError("the webhook secret does not open with this key") from None


# -- URL policy -------------------------------------------------------------------------


class RefusedUrl(Exception):
    """A webhook URL this platform will not call; the message says why."""


@dataclass(frozen=True)
class Target:
    """Where one attempt connects: the checked address, and the name it was resolved from."""

    scheme: str
    host: str  # as written in the URL (for Host and TLS server name)
    port: int
    address: str  # the checked IP the connection goes to


def check_syntax(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of an acceptable URL, or RefusedUrl."""
    if len(url) > MAX_URL_LENGTH:
        raise RefusedUrl(f"at most {MAX_URL_LENGTH} characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as error:
        raise RefusedUrl(f"not a URL ({error})") from None
    if parts.scheme not in ("http", "https"):
        raise RefusedUrl("the scheme must be https or http")
    if not parts.hostname:
        raise RefusedUrl("the URL names no host")
    if parts.username is not None or parts.password is not None:
        raise RefusedUrl("credentials in the URL are not accepted")
    if parts.fragment:
        raise RefusedUrl("a fragment is never sent; leave it out")
    return parts.scheme, parts.hostname.lower(), port or (443 if parts.scheme == "https" else 80)


def address_problem(ip: IpAddress, port: int, policy: WebhookSettings) -> str | None:
    """Why the platform must not connect to `ip:port` (None when it may)."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    local = ip.is_loopback or ip.is_unspecified or str(ip) == policy.own_host
    if local and port in policy.own_ports:
        return "it points at this platform itself"
    if policy.allow_private_networks:
        return None
    if ip.is_multicast:
        problem = f"{ip} is a multicast address"
    elif ip.is_loopback or ip.is_unspecified:
        problem = f"{ip} is this machine"
    elif ip.is_link_local:
        problem = f"{ip} is link-local (cloud metadata services live there)"
    elif ip.is_private or ip.is_reserved or not ip.is_global:
        problem = f"{ip} is a private or reserved address"
    else:
        return None
    return f"{problem}; {_ALLOW_PRIVATE}=true allows such addresses (tests, closed networks)"


_ALLOW_PRIVATE = setting_name("events", "webhook_allow_private_networks")


async def resolve(url: str, policy: WebhookSettings) -> Target:
    """Check `url` and resolve its host now; every address it resolves to must be
    allowed (a name with one private answer is refused), and the connection then goes to
    the checked address, so a later DNS answer (rebinding) cannot redirect it."""
    scheme, host, port = check_syntax(url)
    local_name = host == "localhost" or host.endswith(".localhost")
    if host in policy.denied_hosts:
        denied = setting_name("events", "webhook_denied_hosts")
        raise RefusedUrl(f"{host} may not receive webhooks (it is listed in {denied})")
    if local_name and not policy.allow_private_networks:
        raise RefusedUrl(
            f"{host} is this machine; {_ALLOW_PRIVATE}=true allows such addresses "
            "(tests, closed networks)"
        )
    try:
        literal: IpAddress | None = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        literal = None
    if literal is not None:
        addresses = [literal]
    else:
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as error:
            raise RefusedUrl(f"{host} does not resolve ({error})") from None
        addresses = [ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos]
        if not addresses:
            raise RefusedUrl(f"{host} does not resolve")
    for address in addresses:
        problem = address_problem(address, port, policy)
        if problem:
            raise RefusedUrl(f"{host}: {problem}")
    return Target(scheme, host, port, str(addresses[0]))
