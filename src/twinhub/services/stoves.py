"""A customer's view of the programme: their stoves, their reports, their claims, credits.

This is what the USSD menus need, said in registry terms and nothing else (no HTTP, no
screen words). Rules that live here:
- a customer's stoves are the Device domains whose `ownerCustomerId` names the customer
  (services/ownership.py): the household, to whom the credits of the stove's claims are
  minted; a domain the customer merely co-controls is not "theirs";
- a report is a claim about one of their stoves, submitted as the customer, into the
  newest collection of the stove's project that is open now and takes clean-cooking
  claims; a project that governance has not verified takes no report; a report covers the
  calendar month it is sent in, and a stove's month is counted once whatever the channel
  (ClaimSubmissions refuses a second with PeriodClaimed, naming the first);
- their claims are listed newest first (the latest report is the one they look for).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from twinhub.kernel.errors import Conflict, FieldProblem, Invalid, NotFound, NotVerified
from twinhub.kernel.identifiers import customer_did
from twinhub.kernel.principals import Principal
from twinhub.services.claims import OPEN, REJECTED, ClaimFilter, ClaimService, last_month_start
from twinhub.services.credentials import rfc3339
from twinhub.services.credits import CreditService
from twinhub.services.domains import ACTIVE, DomainService
from twinhub.services.ownership import stoves_of_customer
from twinhub.services.paging import decode_cursor, encode_cursor

CLAIM_PROTOCOL = "did:ixo:protocol/clean-cooking-claim"
COOKING, FUEL = "cooking", "fuel"
# What each kind of report counts, as the claim protocol names it.
REPORT_FIELDS = {COOKING: "mealsCooked", FUEL: "fuelKg"}
MIN_QUANTITY, MAX_QUANTITY = 1, 1000
_SCAN = 200  # rows per registry page while reading a customer's stoves or claims


def report_month(now: datetime) -> date:
    """The first day of the month a phone report sent at `now` covers (report_period)."""
    return last_month_start(now).date()


def report_period(now: datetime) -> dict[str, str]:
    """The period a phone report covers: the calendar month (UTC) just ended, the same
    stove-month an API claim without a period counts against (services.claims), so a report
    sent by phone and by API is counted once; its telemetry is complete, so the oracle can
    compute its credits at once."""
    start = last_month_start(now)
    end = (start + timedelta(days=32)).replace(day=1)
    return {"periodStart": rfc3339(start), "periodEnd": rfc3339(end)}


class NoOpenCollection(Conflict):
    """The stove's project takes no clean-cooking reports at the moment."""

    code = "no_open_collection"


class StoveInactive(Conflict):
    """A deactivated stove produces no claims (the claim service refuses it as well)."""

    code = "stove_inactive"


@dataclass(frozen=True, slots=True)
class StoveView:
    did: str
    name: str  # metadata.name, else the serial number, else the DID
    status: str  # the domain's status: active | deactivated
    project: str | None  # the `project` relationship's target
    project_verified: bool  # verified by governance and active
    serial: str | None = None


@dataclass(frozen=True, slots=True)
class ClaimLine:
    id: str
    status: str  # pending | approved | rejected | flagged | disputed | invalidated
    report_type: str | None
    asset: str | None
    submitted_at: datetime
    reason: str | None = None  # a rejected claim's: one of REJECTION_REASONS
    # An approved claim's credits: "awaiting issuance" or "issued" (services.claims).
    credits: str | None = None


# Why a claim was rejected, in a few words a household can act on (a code the screens
# translate), read from the evaluator's own words: the oracle's (services.claims'
# double-counting check, the oracle's corroboration) or a person's.
REJECTION_REASONS = ("tooMany", "counted", "noData", "other")
_REASON_MARKERS = (
    ("counted", ("double counting", "credited already", "counted already", "duplicate")),
    ("tooMany", ("the telemetry recorded", "over-claim", "overclaim", "too many", "too much")),
    ("noData", ("no meter", "no telemetry", "no readings", "no reading", "no data", "offline")),
)


def rejection_reason(reason: str | None) -> str:
    """The REJECTION_REASONS code of an evaluator's reason ("other" when none says it)."""
    said = (reason or "").lower()
    for code, markers in _REASON_MARKERS:
        if any(marker in said for marker in markers):
            return code
    return "other"


@dataclass(frozen=True, slots=True)
class ClaimPage:
    """A page of a customer's claims, newest first."""

    items: list[ClaimLine]
    cursor: str  # asking again with it gives this same page, whatever was added since
    next_cursor: str | None  # the page of older claims; None on the oldest page
    older: int  # how many claims are older than this page


def quantity_problem(quantity: object) -> str | None:
    """Why a reported quantity cannot be taken, or None (a whole number 1..1000)."""
    if isinstance(quantity, bool) or not isinstance(quantity, int):
        return "expected a whole number"
    if not MIN_QUANTITY <= quantity <= MAX_QUANTITY:
        return f"expected {MIN_QUANTITY} to {MAX_QUANTITY}"
    return None


def stove_name(record: dict[str, Any]) -> str:
    """What a household calls its stove on USSD (lists, survey questions): its name, else
    its serial number, else its DID."""
    name = (record.get("metadata") or {}).get("name")
    serial = (record.get("properties") or {}).get("serialNumber")
    for candidate in (name, serial):
        if isinstance(candidate, str) and candidate.strip():
            return candidate.strip()
    return str(record["did"])


def _project_of(record: dict[str, Any]) -> str | None:
    """The project a stove serves: the target of its `project` relationship."""
    targets = [r["target"] for r in record.get("relationships", []) if r["type"] == "project"]
    return targets[0] if targets else None


def _collection_takes_claims(view: dict[str, Any], now: datetime) -> bool:
    """Open, within its window and under its quota: what `ClaimSubmissions.submit` will accept."""
    if view["protocol"] != CLAIM_PROTOCOL or view["state"] != OPEN:
        return False
    start = datetime.fromisoformat(view["startDate"]) if view["startDate"] else None
    end = datetime.fromisoformat(view["endDate"]) if view["endDate"] else None
    if (start and now < start) or (end and now >= end):
        return False
    return view["quota"] is None or view["counts"]["submitted"] < view["quota"]


class StoveService:
    def __init__(
        self, domains: DomainService, claims: ClaimService, credits: CreditService
    ) -> None:
        self._domains = domains
        self._claims = claims
        self._credits = credits

    # -- stoves ----------------------------------------------------------------------------
    async def stoves_of(self, customer_id: str) -> list[StoveView]:
        """Every stove the customer owns, oldest first (a stable order for numbered pages)."""
        records = await stoves_of_customer(self._domains, customer_id)
        verified: dict[str, bool] = {}
        stoves = []
        for record in records:
            project = _project_of(record)
            if project is not None and project not in verified:
                verified[project] = await self._verified(project)
            serial = (record.get("properties") or {}).get("serialNumber")
            stoves.append(
                StoveView(
                    did=record["did"],
                    name=stove_name(record),
                    status=record["status"],
                    project=project,
                    project_verified=bool(project and verified[project]),
                    serial=serial if isinstance(serial, str) else None,
                )
            )
        return stoves

    async def stove_of(self, customer_id: str, stove_did: str) -> StoveView:
        """One of the customer's stoves; NotFound for any other DID (theirs or nobody's)."""
        for stove in await self.stoves_of(customer_id):
            if stove.did == stove_did:
                return stove
        raise NotFound(f"No stove {stove_did} among customer {customer_id}'s stoves.")

    async def _verified(self, project: str) -> bool:
        try:
            record = await self._domains.get(project)
        except NotFound:
            return False
        return bool(record["verified"]) and record["status"] == ACTIVE

    # -- reports ---------------------------------------------------------------------------
    async def report(
        self, customer_id: str, stove_did: str, kind: str, quantity: int
    ) -> dict[str, Any]:
        """Submit a cooking or fuel report about one of the customer's stoves; the claim."""
        problem = quantity_problem(quantity)
        if kind not in REPORT_FIELDS or problem:
            details = [FieldProblem("quantity", problem)] if problem else []
            if kind not in REPORT_FIELDS:
                details.append(FieldProblem("kind", " or ".join(REPORT_FIELDS)))
            raise Invalid("The report is invalid.", details)
        stove = await self.stove_of(customer_id, stove_did)
        if stove.status != ACTIVE:
            raise StoveInactive(f"Stove {stove.did} is {stove.status}; it takes no reports.")
        if stove.project is None:
            raise NoOpenCollection(f"Stove {stove.did} belongs to no project.")
        if not stove.project_verified:
            raise NotVerified(
                f"{stove.project} is not verified: only a project verified by governance "
                "takes claims (rule: verified domains only)."
            )
        collection = await self._open_collection(stove.project)
        data = {"reportType": kind, REPORT_FIELDS[kind]: quantity, "channel": "ussd"}
        data |= report_period(datetime.now(UTC))
        writer = Principal(customer_did(customer_id), frozenset({"writer"}))
        return await self._claims.submissions.submit(collection, data, writer, asset=stove.did)

    async def _open_collection(self, project: str) -> int:
        """The newest collection of the project that takes clean-cooking claims now."""
        now = datetime.now(UTC)
        newest: int | None = None
        cursor: str | None = None
        while True:
            page = await self._claims.collections.collections(project, cursor, _SCAN)
            for view in page.items:
                if _collection_takes_claims(view, now):
                    newest = view["id"]  # pages run oldest first: the last one wins
            cursor = page.next_cursor
            if cursor is None:
                break
        if newest is None:
            raise NoOpenCollection(f"{project} has no open clean-cooking claim collection.")
        return newest

    # -- claims and credits ----------------------------------------------------------------
    async def claims_of(self, customer_id: str, cursor: str | None, limit: int) -> ClaimPage:
        """The claims the customer submitted, NEWEST first, `limit` at a time.

        ClaimViews pages oldest first, so the customer's claims are read whole (one per
        report: a few hundred at most) and cut from the newest end. A cursor counts the
        claims up to a page's newest one; claims are only ever appended, so the pages cut
        from a first page's cursor stay the same while new reports arrive (those appear
        on a fresh first page, asked for without a cursor).
        """
        limit = max(1, min(limit, 100))
        agent = customer_did(customer_id)
        views: list[dict[str, Any]] = []
        after: str | None = None
        while True:
            page = await self._claims.views.claims(ClaimFilter(agent=agent), after, _SCAN)
            views += page.items
            after = page.next_cursor
            if after is None:
                break
        end = len(views) if cursor is None else min(decode_cursor(cursor), len(views))
        start = max(0, end - limit)
        lines = [
            ClaimLine(
                id=view["id"],
                status=view["status"],
                report_type=view["data"].get("reportType"),
                asset=view["asset"],
                submitted_at=datetime.fromisoformat(view["submittedAt"]),
                reason=rejection_reason(view["reason"]) if view["status"] == REJECTED else None,
                credits=(view.get("credits") or {}).get("state"),
            )
            for view in reversed(views[start:end])
        ]
        return ClaimPage(lines, encode_cursor(end), encode_cursor(start) if start else None, start)

    async def balance(self, customer_id: str) -> list[tuple[str, str]]:
        """(token, spendable amount in whole credits, as text) for every credit class the
        customer ever held: 67984 millionths of CARBON read 0.067984."""
        rows = await self._credits.balances(customer_did(customer_id))
        shown = []
        for row in rows:
            decimals = (await self._credits.token(row["token"]))["decimals"]
            shown.append((row["token"], whole_credits(int(row["amount"]), decimals)))
        return shown


def whole_credits(amount: int, decimals: int) -> str:
    """An amount in a token's smallest unit as whole credits, without trailing zeros."""
    if decimals <= 0:
        return str(amount)
    sign = "-" if amount < 0 else ""
    whole, part = divmod(abs(amount), 10**decimals)
    fraction = str(part).rjust(decimals, "0").rstrip("0")
    return f"{sign}{whole}.{fraction}" if fraction else f"{sign}{whole}"
