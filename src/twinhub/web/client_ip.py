"""Which address a request comes from, honouring a reverse proxy only when told to.

X-Forwarded-For is trusted only with TRUST_PROXY_ENABLED=true, and then read from the right:
each trusted proxy appends the address it saw, so the entry `TRUST_PROXY_HOPS` from the right
is the one the outermost trusted proxy saw. Entries further left are the client's own words.
"""

from __future__ import annotations

import ipaddress

from starlette.types import Scope


def peer_ip(scope: Scope) -> str:
    client = scope.get("client")
    return client[0] if client else "unknown"


def client_ip(scope: Scope, trust_proxy: bool, hops: int = 1) -> str:
    peer = peer_ip(scope)
    if not trust_proxy:
        return peer
    forwarded: list[str] = []
    for name, value in scope.get("headers", ()):
        if name == b"x-forwarded-for":
            forwarded.extend(part.strip() for part in value.decode("latin-1").split(","))
    if len(forwarded) < hops:
        return peer
    candidate = forwarded[-hops]
    try:
        return str(ipaddress.ip_address(candidate))
    except ValueError:
        return peer


def is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False
