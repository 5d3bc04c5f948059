"""One JSON error shape for every JSON endpoint of twinhub:
`{"error": {"code": "...", "message": "...", "details": [{"field": ..., "error": ...}]}}`."""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse


def error_response(
    status: int,
    code: str,
    message: str,
    details: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    body = {"error": {"code": code, "message": message, "details": details or []}}
    return JSONResponse(body, status_code=status, headers=headers)
