"""Credits (CARBON, ...): minted for approved claims, transferred, retired.

Rules that live here:
- credits come into being only by the registry's issuance of a verified monitoring period
  (oracle.period_workflow mints through `Minting` inside its own ledger write): the
  period's credits to its proponent, and those of the approved claims it carries to their
  owners (services.claim_issuance); nobody mints by hand;
- the owner of a balance, or an admin acting as custodian for people who reach twinhub
  by phone only, may transfer or retire it; retiring needs a reason, and produces a
  signed retirement certificate in the same write (services.retirement_certificates);
- every movement is a ledger transaction and a row of `credit_movements`; a token's
  supply is what was minted less what was retired, and the balances always add up to it.
All writes run inside one ledger write, which serialises them, so no movement is lost or
applied twice under concurrency.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Insert, func, insert, or_, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.db.dialects import Dialect, dialect_of
from twinhub.db.models import CreditBalance, CreditMovement, CreditToken
from twinhub.kernel.bus import Cause
from twinhub.kernel.clock import utcnow
from twinhub.kernel.errors import (
    FieldProblem,
    Forbidden,
    InsufficientCredits,
    Invalid,
    NotFound,
)
from twinhub.kernel.identifiers import is_did
from twinhub.kernel.principals import Principal, require_role
from twinhub.mrv.retirement_certificate import beneficiary_problem
from twinhub.services.ledger import Ledger, LedgerWrite
from twinhub.services.paging import Page, decode_cursor, split_page
from twinhub.services.protocols import TOKEN_CLASS_PATTERN
from twinhub.services.retirement_certificates import RetirementCertificates

MAX_AMOUNT = 10**15  # far above any programme, far below 64-bit overflow of the sums
MINT, TRANSFER, RETIRE = "mint", "transfer", "retire"
_REASON = re.compile(r"^\S.{0,499}$", re.DOTALL)


@dataclass(frozen=True)
class Movement:
    kind: str
    token: str
    sender: str | None
    recipient: str | None
    amount: int
    reason: str | None = None
    claim_id: str | None = None


def amount_problem(amount: Any) -> str | None:
    if not isinstance(amount, int) or isinstance(amount, bool) or not 1 <= amount <= MAX_AMOUNT:
        return f"expected a whole number of credits from 1 to {MAX_AMOUNT}"
    return None


def _movement_view(row: CreditMovement) -> dict[str, Any]:
    return {
        "id": row.id,
        "kind": row.kind,
        "token": row.token,
        "from": row.sender,
        "to": row.recipient,
        "amount": row.amount,
        "reason": row.reason,
        "claim": row.claim_id,
        "actor": row.actor,
        "ledgerHeight": row.ledger_height,
        "at": row.created_at.isoformat(),
    }


async def _appended(
    write: LedgerWrite, movement: Movement, actor: str, cause: Cause | None = None
) -> dict[str, Any]:
    """The movement's ledger transaction, appended (its events caused by `cause`); its
    `credit_movements` row (columns)."""
    subject = movement.sender or movement.recipient
    assert subject is not None
    payload = {
        "token": movement.token,
        "from": movement.sender,
        "to": movement.recipient,
        "amount": movement.amount,
        "reason": movement.reason,
        "claim": movement.claim_id,
    }
    transaction = await write.append(
        f"credits.{movement.kind}", subject, actor, payload, cause=cause
    )
    return {
        "kind": movement.kind,
        "token": movement.token,
        "sender": movement.sender,
        "recipient": movement.recipient,
        "amount": movement.amount,
        "reason": movement.reason,
        "claim_id": movement.claim_id,
        "actor": actor,
        "ledger_height": transaction.height,
        "created_at": transaction.created_at,
    }


@functools.cache
def _mint_statements(dialect: Dialect) -> tuple[Insert, Insert, Insert]:
    """The token upsert, the balance upsert and the movement insert, built once per
    dialect and run with each write's rows as parameters: building (and keying for the
    compiled cache) a statement of N VALUES per write cost more than the statement."""
    upsert = dialect.insert
    tokens = upsert(CreditToken.__table__)
    tokens = tokens.on_conflict_do_update(
        index_elements=["name"],
        set_={"minted": CreditToken.__table__.c.minted + tokens.excluded.minted},
    )
    balances = upsert(CreditBalance.__table__)
    balances = balances.on_conflict_do_update(
        index_elements=["owner", "token"],
        set_={"amount": CreditBalance.__table__.c.amount + balances.excluded.amount},
    )
    return tokens, balances, insert(CreditMovement.__table__)


class Minting:
    """The mints of one ledger write, gathered: `add` appends each mint's ledger
    transaction where it happens; `finish` then adds each token's and each holder's sum in
    one upsert per table, and stores the movements in one statement. A batch of a thousand
    approvals thus touches the token row once, not a thousand times."""

    def __init__(self, write: LedgerWrite) -> None:
        self._write = write
        self._tokens: dict[str, list[Any]] = {}  # name -> [protocol, decimals, amount]
        self._balances: dict[tuple[str, str], int] = {}  # (owner, token) -> amount
        self._rows: list[dict[str, Any]] = []

    async def add(
        self,
        token: str,
        protocol_did: str,
        owner: str,
        amount: int,
        claim_id: str,
        actor: str,
        decimals: int = 0,
        cause: Cause | None = None,
    ) -> None:
        """Mint `amount` (in the token's smallest unit) for `owner`; `decimals` fixes the
        token's smallest unit when this is its first mint; `cause`: what the credits.minted
        event follows from (the approval's claim.approved)."""
        movement = Movement(MINT, token, None, owner, amount, None, claim_id)
        self._rows.append(await _appended(self._write, movement, actor, cause))
        self._tokens.setdefault(token, [protocol_did, decimals, 0])[2] += amount
        self._balances[owner, token] = self._balances.get((owner, token), 0) + amount

    async def finish(self) -> None:
        """Apply the gathered mints: token rows, then balances, in key order (the order
        every writer takes them in), then the movements."""
        if not self._tokens:
            return
        session = self._write.session
        tokens, balances, movements = _mint_statements(dialect_of(session))
        now = utcnow()
        await session.execute(
            tokens,
            [
                {
                    "name": name,
                    "protocol_did": protocol_did,
                    "minted": amount,
                    "retired": 0,
                    "decimals": decimals,
                    "created_at": now,
                }
                for name, (protocol_did, decimals, amount) in sorted(self._tokens.items())
            ],
        )
        await session.execute(
            balances,
            [
                {"owner": owner, "token": token, "amount": amount, "retired": 0}
                for (owner, token), amount in sorted(self._balances.items())
            ],
        )
        await session.execute(movements, self._rows)


class CreditService:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        ledger: Ledger,
        certificates: RetirementCertificates | None = None,
    ) -> None:
        self._sessions = sessions
        self._ledger = ledger
        self.certificates = certificates

    # -- writes ----------------------------------------------------------------------------
    async def transfer(
        self, token: str, sender: str, recipient: str, amount: int, actor: Principal
    ) -> dict[str, Any]:
        problems = []
        if not is_did(recipient):
            problems.append(FieldProblem("to", "expected a DID"))
        elif recipient == sender:
            problems.append(FieldProblem("to", "the recipient is the sender"))
        if (problem := amount_problem(amount)) is not None:
            problems.append(FieldProblem("amount", problem))
        if problems:
            raise Invalid("The transfer is invalid.", problems)
        self._check_holder(sender, actor)
        async with self._ledger.write() as write:
            await self._token(write.session, token, lock=False)
            source = await self._spendable(write.session, sender, token, amount)
            source.amount -= amount
            target = await self._balance(write.session, recipient, token)
            target.amount += amount
            return await self._record(
                write, Movement(TRANSFER, token, sender, recipient, amount), actor.did
            )

    async def retire(
        self,
        token: str,
        owner: str,
        amount: int,
        reason: str,
        actor: Principal,
        beneficiary: str | None = None,
    ) -> dict[str, Any]:
        """Retire `amount` of `owner`'s credits on behalf of `beneficiary` (default: the
        owner); the movement, with its certificate's address when certificates are kept."""
        problems = []
        if (problem := amount_problem(amount)) is not None:
            problems.append(FieldProblem("amount", problem))
        if not isinstance(reason, str) or not _REASON.match(reason):
            problems.append(FieldProblem("reason", "say why, in 1 to 500 characters"))
        if beneficiary is not None and (problem := beneficiary_problem(beneficiary)):
            problems.append(FieldProblem("beneficiary", problem))
        if problems:
            raise Invalid("The retirement is invalid.", problems)
        self._check_holder(owner, actor)
        async with self._ledger.write() as write:
            row = await self._token(write.session, token, lock=True)
            balance = await self._spendable(write.session, owner, token, amount)
            balance.amount -= amount
            balance.retired += amount
            row.retired += amount
            movement = await self._record(
                write, Movement(RETIRE, token, owner, None, amount, reason), actor.did
            )
            if self.certificates is None:
                return movement
            signed = await self.certificates.issue(
                write.session,
                movement,
                (beneficiary or owner).strip(),
                row.decimals,
                datetime.fromisoformat(movement["at"]),
            )
            return {
                **movement,
                "certificate": {
                    "id": signed["id"],
                    "url": f"/v1/retirements/{movement['id']}/certificate",
                },
            }

    @staticmethod
    def _check_holder(owner: str, actor: Principal) -> None:
        require_role(actor, "writer")
        if not is_did(owner):
            raise Invalid("The holder must be a DID.", [FieldProblem("from", "expected a DID")])
        if actor.did != owner and not actor.is_admin:
            raise Forbidden(f"Only {owner} (or an admin, as custodian) may move its credits.")

    @staticmethod
    async def _token(session: AsyncSession, token: str, lock: bool) -> CreditToken:
        row = await session.get(CreditToken, token, with_for_update=lock)
        if row is None:
            raise NotFound(f"No credits of class {token!r} were ever minted.")
        return row

    @staticmethod
    async def _balance(session: AsyncSession, owner: str, token: str) -> CreditBalance:
        row = await session.get(CreditBalance, (owner, token), with_for_update=True)
        if row is None:
            row = CreditBalance(owner=owner, token=token, amount=0, retired=0)
            session.add(row)
        return row

    async def _spendable(
        self, session: AsyncSession, owner: str, token: str, amount: int
    ) -> CreditBalance:
        row = await self._balance(session, owner, token)
        if row.amount < amount:
            raise InsufficientCredits(
                f"{owner} holds {row.amount} {token}; {amount} were asked for.",
                [FieldProblem("amount", f"at most {row.amount}")],
            )
        return row

    @staticmethod
    async def _record(write: LedgerWrite, movement: Movement, actor: str) -> dict[str, Any]:
        row = CreditMovement(**await _appended(write, movement, actor))
        write.session.add(row)
        await write.session.flush()
        return _movement_view(row)

    # -- reads -----------------------------------------------------------------------------
    async def tokens(self) -> list[dict[str, Any]]:
        async with self._sessions() as session:
            rows = await session.scalars(select(CreditToken).order_by(CreditToken.name))
            return [await self._token_view(session, row) for row in rows]

    async def token(self, token: str) -> dict[str, Any]:
        if not TOKEN_CLASS_PATTERN.match(token):
            raise NotFound(f"No credits of class {token!r} were ever minted.")
        async with self._sessions() as session:
            return await self._token_view(session, await self._token(session, token, False))

    @staticmethod
    async def _token_view(session: AsyncSession, row: CreditToken) -> dict[str, Any]:
        held, holders = (
            await session.execute(
                select(func.coalesce(func.sum(CreditBalance.amount), 0), func.count()).where(
                    CreditBalance.token == row.name, CreditBalance.amount > 0
                )
            )
        ).one()
        return {
            "name": row.name,
            "protocol": row.protocol_did,
            "minted": row.minted,
            "retired": row.retired,
            "supply": row.minted - row.retired,
            "decimals": row.decimals,
            "held": int(held),
            "holders": int(holders),
        }

    async def balances(self, owner: str) -> list[dict[str, Any]]:
        """Amounts in the token's smallest unit, with its `decimals` so that a wallet shows
        67984 CARBON at six decimals as 0.067984."""
        async with self._sessions() as session:
            rows = await session.execute(
                select(CreditBalance, CreditToken.decimals)
                .join(CreditToken, CreditToken.name == CreditBalance.token)
                .where(CreditBalance.owner == owner)
                .order_by(CreditBalance.token)
            )
            return [
                {
                    "token": row.token,
                    "amount": row.amount,
                    "retired": row.retired,
                    "decimals": decimals,
                }
                for row, decimals in rows
            ]

    async def movements_of(self, token: str, kind: str) -> list[dict[str, Any]]:
        """Every movement of one kind (retire, transfer, ...) of a token, oldest first."""
        async with self._sessions() as session:
            rows = await session.scalars(
                select(CreditMovement)
                .where(CreditMovement.token == token, CreditMovement.kind == kind)
                .order_by(CreditMovement.id)
            )
            return [_movement_view(row) for row in rows]

    async def movements(
        self, holder: str | None, token: str | None, cursor: str | None, limit: int
    ) -> Page[dict[str, Any]]:
        after = decode_cursor(cursor, CreditMovement.id)
        query = select(CreditMovement).where(CreditMovement.id > after)
        if holder is not None:
            query = query.where(
                or_(CreditMovement.sender == holder, CreditMovement.recipient == holder)
            )
        if token is not None:
            query = query.where(CreditMovement.token == token)
        async with self._sessions() as session:
            rows = list(await session.scalars(query.order_by(CreditMovement.id).limit(limit + 1)))
        rows, next_cursor = split_page(rows, limit, lambda row: row.id)
        return Page([_movement_view(row) for row in rows], next_cursor)

    async def minted_for(self, claim_ids: Sequence[str]) -> dict[str, tuple[str, int]]:
        """The token and its decimals that each of these claims' approval minted, so a claim's
        amount (in the token's smallest unit) can be shown as credits; claims that minted
        nothing are absent."""
        if not claim_ids:
            return {}
        async with self._sessions() as session:
            rows = await session.execute(
                select(CreditMovement.claim_id, CreditToken.name, CreditToken.decimals)
                .join(CreditToken, CreditToken.name == CreditMovement.token)
                .where(CreditMovement.kind == MINT, CreditMovement.claim_id.in_(claim_ids))
            )
            return {claim: (token, decimals) for claim, token, decimals in rows}
