"""Who may use operator endpoints (USSD debug and session list).

With an operator token configured, a request must carry `Authorization: Bearer <token>`
(401 otherwise). Without one, only a caller that is provably local is served (403
otherwise): it connects from loopback, no proxy is declared (TRUST_PROXY_ENABLED unset: a
same-host reverse proxy also connects from loopback, on behalf of anyone), the request
carries no forwarding header, and the deployment is not production, where the token is
always needed.
"""

from __future__ import annotations

import hmac

from pydantic import SecretStr
from starlette.requests import Request
from starlette.responses import Response

from twinhub.web.client_ip import is_loopback, peer_ip
from twinhub.web.errors import error_response

_FORWARDING = (b"x-forwarded-for", b"forwarded", b"x-real-ip", b"x-forwarded-host")


def operator_denial(
    request: Request,
    token: SecretStr | None,
    behind_proxy: bool = False,
    production: bool = False,
) -> Response | None:
    """None when the request may proceed, else the 401/403 response to send."""
    if token is not None or production:
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        expected = token.get_secret_value().encode() if token is not None else b""
        if (
            not expected
            or scheme.lower() != "bearer"
            or not hmac.compare_digest(given.strip().encode(), expected)
        ):
            return error_response(
                401,
                "unauthorized",
                "This endpoint needs the operator token as 'Authorization: Bearer <token>'.",
                headers={"WWW-Authenticate": 'Bearer realm="twinhub-operator"'},
            )
        return None
    forwarded = any(name in _FORWARDING for name, _ in request.scope.get("headers", ()))
    if behind_proxy or forwarded or not is_loopback(peer_ip(request.scope)):
        return error_response(
            403,
            "forbidden",
            "Operator endpoints answer only to local callers (loopback, no proxy, not "
            "production) unless USSD_OPERATOR_TOKEN is set.",
        )
    return None
