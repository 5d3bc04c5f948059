"""Who may use operator endpoints (USSD debug and session list).

With an operator token configured, a request must carry `Authorization: Bearer <token>`
(401 otherwise). Without one, only clients connecting from loopback are served (403
otherwise); X-Forwarded-For is never consulted here, since a client can write anything in it.
"""

from __future__ import annotations

import hmac

from pydantic import SecretStr
from starlette.requests import Request
from starlette.responses import Response

from twinhub.web.client_ip import is_loopback, peer_ip
from twinhub.web.errors import error_response


def operator_denial(request: Request, token: SecretStr | None) -> Response | None:
    """None when the request may proceed, else the 401/403 response to send."""
    if token is not None:
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        expected = token.get_secret_value().encode()
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), expected):
            return error_response(
                401,
                "unauthorized",
                "This endpoint needs the operator token as 'Authorization: Bearer <token>'.",
                headers={"WWW-Authenticate": 'Bearer realm="twinhub-operator"'},
            )
        return None
    if not is_loopback(peer_ip(request.scope)):
        return error_response(
            403,
            "forbidden",
            "Operator endpoints answer only on loopback unless USSD_OPERATOR_TOKEN is set.",
        )
    return None
