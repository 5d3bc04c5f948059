"""Retirement certificates, public: anyone (no API key) fetches a retirement's certificate
and checks one, as a buyer of an offset or an auditor would. The certificate is signed by
the platform's key; the check says whether it is the one recorded, for the retirement the
ledger recorded, naming credentials that are recorded and verify. Needing no key, they are
limited per client address (REGISTRY_CERTIFICATE_RATE_LIMIT): 429 with `Retry-After`."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Request
from pydantic import Field

from twinhub.platform import Platform
from twinhub.registry.errors import ERROR_RESPONSES, RateLimited
from twinhub.registry.schemas import Body
from twinhub.web.client_ip import client_ip


async def per_address(request: Request) -> None:
    """The caller's address within REGISTRY_CERTIFICATE_RATE_LIMIT, or 429."""
    security = request.app.state.platform.settings.security
    address = client_ip(request.scope, security.trust_proxy_enabled, security.trust_proxy_hops)
    retry_after = await request.app.state.certificate_limiter.hit(address)
    if retry_after is not None:
        raise RateLimited(retry_after)


router = APIRouter(
    prefix="/v1",
    responses={
        **ERROR_RESPONSES,
        429: {"description": "More than REGISTRY_CERTIFICATE_RATE_LIMIT from this address"},
    },
    dependencies=[Depends(per_address)],
)


def _platform(request: Request) -> Platform:
    return request.app.state.platform


class CertificateIn(Body):
    certificate: dict[str, Any] = Field(description="A retirement certificate, as issued.")


@router.get(
    "/retirements/{retirement_id}/certificate",
    tags=["credits"],
    summary="A retirement's signed certificate and its check (public)",
)
async def certificate(
    request: Request, retirement_id: Annotated[int, Path(ge=1, le=2**62)]
) -> dict[str, Any]:
    certificates = _platform(request).credits.certificates
    assert certificates is not None
    return await certificates.certificate(retirement_id)


@router.post(
    "/retirement-certificates/verification",
    tags=["credits"],
    summary="Check a retirement certificate against the ledger (public)",
)
async def check(request: Request, body: CertificateIn) -> dict[str, Any]:
    certificates = _platform(request).credits.certificates
    assert certificates is not None
    return await certificates.check(body.certificate)
