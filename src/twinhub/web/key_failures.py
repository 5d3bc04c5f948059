"""Wrong API keys cost the caller's address its allowance (API_KEY_FAILURE_LIMIT), wherever a
key is tried: the API's `Authorization` header and the console's sign-in form count against
one counter per address, so the console is no side door for guessing keys."""

from __future__ import annotations

from starlette.types import Scope

from twinhub.kernel.ratelimit import RateLimiter
from twinhub.settings import SecuritySettings, StorageSettings
from twinhub.web.client_ip import client_ip


class KeyFailures:
    """The one rule for failed keys: each failure is counted against the client's address;
    beyond the limit the caller is told how long to wait."""

    def __init__(self, security: SecuritySettings, storage: StorageSettings) -> None:
        self._trust_proxy = security.trust_proxy_enabled
        self._hops = security.trust_proxy_hops
        self._limiter = RateLimiter.create(
            security.api_key_failure_limit_item,
            storage.redis_address,
            storage.redis_key_prefix,
            "key-failures",
        )

    async def failed(self, scope: Scope) -> int | None:
        """Count a wrong key from this request's client: None while within the allowance,
        else the seconds after which it may try again (answer 429 with Retry-After)."""
        return await self._limiter.hit(client_ip(scope, self._trust_proxy, self._hops))
