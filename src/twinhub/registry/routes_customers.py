"""Households (USSD customers) for operators: find one by phone or ID, see their stoves,
claims and PIN lock-outs (admin and registry keys), lift the lock-outs, and hand stoves to
them (admin keys only).

A customer's record holds a name and a phone number: personal data. An organisation's keys
do not read it, not even for the households of its own stoves: any writer may name any
existing customer as its stove's household (`ownerCustomerId`), so "owns one of our stoves"
proves nothing about whose person it is (db.visibility keeps those reads to the keys that
see everything). No phone number is written to a log (the write log masks it).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from pydantic import BaseModel, Field
from starlette.responses import JSONResponse, Response

from twinhub.db.visibility import viewer_of
from twinhub.kernel.errors import FieldProblem, Forbidden, Invalid, NotFound
from twinhub.kernel.identifiers import customer_did
from twinhub.kernel.principals import Principal, require_role
from twinhub.registry.auth import Reader
from twinhub.registry.errors import ERROR_RESPONSES
from twinhub.registry.schemas import DomainOut
from twinhub.services.customer_ids import is_valid_customer_id
from twinhub.services.customers import CustomerView, Lockout
from twinhub.services.ownership import OwnerMismatch, assign_stove, stoves_of_customer

router = APIRouter(prefix="/v1/customers", responses=ERROR_RESPONSES, tags=["customers"])
CUSTOMER_ID = Annotated[str, Path(pattern=r"^[0-9]{8}$", description="8 digits, as USSD shows")]
PHONE = r"^\+[1-9][0-9]{6,14}$"


class LockOut(BaseModel):
    scope: str = Field(description="account (other phones), own (its own phone), phone (any)")
    failedAttempts: int
    lockouts: int
    lockedUntil: str | None = Field(description="null: locked until an operator unlocks")


class CustomerOut(BaseModel):
    customerId: str
    did: str = Field(description="The DID credits are minted to")
    phoneNumber: str
    fullName: str
    createdAt: str
    locked: bool = Field(description="A lock-out keeps the customer out now")
    lockouts: list[LockOut]


class CustomersOut(BaseModel):
    items: list[CustomerOut]


class StovesOut(BaseModel):
    items: list[DomainOut]


class ClaimLineOut(BaseModel):
    id: str
    status: str
    reportType: str | None
    asset: str | None
    submittedAt: str


class CustomerClaimsOut(BaseModel):
    items: list[ClaimLineOut]
    nextCursor: str | None = Field(description="The page of older claims")
    older: int


class AssignIn(BaseModel):
    stove: str = Field(description="The stove's DID", examples=["did:ixo:entity/jiko-0001"])
    from_: str | None = Field(
        None,
        alias="from",
        description="For a move: the customer ID expected to hold the stove now. Without "
        "it a stove another household holds is refused (409 owner_mismatch), and so is a "
        "move when `from` does not hold it.",
    )


def _record(record: dict[str, Any]) -> Response:
    return JSONResponse(record, headers={"ETag": f'"{record["version"]}"'})


def _lock(lock: Lockout) -> LockOut:
    return LockOut(
        scope=lock.key.split(":", 1)[0],
        failedAttempts=lock.failed_attempts,
        lockouts=lock.lockouts,
        lockedUntil=lock.locked_until.isoformat() if lock.locked_until else None,
    )


async def _out(request: Request, customer: CustomerView) -> CustomerOut:
    locks = await request.app.state.platform.customers.locks_of(customer)
    return CustomerOut(
        customerId=customer.customer_id,
        did=customer_did(customer.customer_id),
        phoneNumber=customer.phone_number,
        fullName=customer.full_name,
        createdAt=customer.created_at.isoformat(),
        locked=bool(locks),
        lockouts=[_lock(lock) for lock in locks],
    )


def _sees_people(caller: Principal) -> None:
    """Customers' records are for the keys that see everything (admin, registry role)."""
    if not viewer_of(caller).everything:
        raise Forbidden("This needs the admin or registry role.")


async def _customer(request: Request, customer_id: str) -> CustomerView:
    found = None
    if is_valid_customer_id(customer_id):
        found = await request.app.state.platform.customers.by_customer_id(customer_id)
    if found is None:
        raise NotFound(f"No customer {customer_id}.")
    return found


@router.get("", summary="Find a customer by phone number or customer ID (admin, registry)")
async def find_customers(
    request: Request,
    caller: Reader,
    phone: Annotated[str | None, Query(pattern=PHONE, description="E.164, e.g. +254700000001")] = (
        None
    ),
    id: Annotated[str | None, Query(pattern=r"^[0-9]{8}$", description="Customer ID")] = None,
) -> CustomersOut:
    _sees_people(caller)
    if (phone is None) == (id is None):
        raise Invalid(
            "Find a customer by exactly one of phone or id.",
            [FieldProblem("phone", "give phone or id, not both and not neither")],
        )
    customers = request.app.state.platform.customers
    found = await customers.by_phone(phone) if phone else None
    if id is not None and is_valid_customer_id(id):
        found = await customers.by_customer_id(id)
    return CustomersOut(items=[await _out(request, found)] if found else [])


@router.get("/{customer_id}", summary="A customer and their lock-outs (admin, registry)")
async def show_customer(request: Request, caller: Reader, customer_id: CUSTOMER_ID) -> CustomerOut:
    _sees_people(caller)
    return await _out(request, await _customer(request, customer_id))


@router.get(
    "/{customer_id}/stoves",
    response_model=StovesOut,
    summary="The stoves of a household (admin, registry)",
)
async def customer_stoves(request: Request, caller: Reader, customer_id: CUSTOMER_ID) -> Any:
    _sees_people(caller)
    await _customer(request, customer_id)
    domains = request.app.state.platform.domains
    return {"items": await stoves_of_customer(domains, customer_id)}


@router.get("/{customer_id}/claims", summary="A customer's claims, newest first (admin, registry)")
async def customer_claims(
    request: Request,
    caller: Reader,
    customer_id: CUSTOMER_ID,
    cursor: Annotated[str | None, Query(max_length=100)] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> CustomerClaimsOut:
    _sees_people(caller)
    await _customer(request, customer_id)
    page = await request.app.state.platform.stoves.claims_of(customer_id, cursor, limit)
    return CustomerClaimsOut(
        items=[
            ClaimLineOut(
                id=line.id,
                status=line.status,
                reportType=line.report_type,
                asset=line.asset,
                submittedAt=line.submitted_at.isoformat(),
            )
            for line in page.items
        ],
        nextCursor=page.next_cursor,
        older=page.older,
    )


@router.delete(
    "/{customer_id}/lockouts",
    status_code=204,
    summary="Lift every PIN lock-out keeping the customer out, their phone's too (admin)",
)
async def unlock_customer(request: Request, caller: Reader, customer_id: CUSTOMER_ID) -> Response:
    require_role(caller, "admin")
    customer = await _customer(request, customer_id)
    if not await request.app.state.platform.customers.unlock_customer(customer):
        raise NotFound(f"Customer {customer_id} is not locked out.")
    return Response(status_code=204)


@router.post(
    "/{customer_id}/stoves",
    response_model=DomainOut,
    summary="Give a stove to this household, or move it here from another (admin)",
    responses={409: {"description": "owner_mismatch: `from` does not hold the stove"}},
)
async def assign_customer_stove(
    request: Request, caller: Reader, customer_id: CUSTOMER_ID, body: AssignIn
) -> Response:
    require_role(caller, "admin")
    await _customer(request, customer_id)
    domains = request.app.state.platform.domains
    record = await assign_stove(
        domains, body.stove, customer_id, caller, body.from_, free_only=body.from_ is None
    )
    return _record(record)


@router.delete(
    "/{customer_id}/stoves/{did:path}",
    response_model=DomainOut,
    summary="Take a stove from this household; it then belongs to none (admin)",
)
async def unassign_customer_stove(
    request: Request, caller: Reader, customer_id: CUSTOMER_ID, did: str
) -> Response:
    require_role(caller, "admin")
    await _customer(request, customer_id)
    try:
        record = await assign_stove(
            request.app.state.platform.domains, did, None, caller, customer_id
        )
    except OwnerMismatch:
        raise NotFound(f"{did} is not among customer {customer_id}'s stoves.") from None
    return _record(record)
