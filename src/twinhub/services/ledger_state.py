"""Replaying the ledger into the state it describes, and naming where the tables disagree.

The hash chain (`Ledger.verify`) proves the ledger itself was not edited; it says nothing
about the tables beside it. A row edited behind the ledger's back (1,000 credits added to a
balance by hand, a domain's record changed in SQL) leaves the chain intact. So `twinhub
ledger verify` also replays every transaction and compares what the ledger says the state
is with what the tables hold:

- credits: each holder's balance and retired amount, each token's minted and retired supply
  (summed from `credits.mint/transfer/retire`), and every `credit_movements` row against the
  transaction at its `ledger_height`;
- domains: each domain's current record (the last `domain.*` transaction about it holds the
  whole record) against the `domains`, `domain_controllers` and `relationships` rows;
- claims: each claim's current view (the last `claims.submit/evaluate` about it) against the
  `claims` row, and each collection's counters against its claims' replayed statuses; a
  claim's credits state is set by the issuance that carries it, not by its own
  transactions, so it is checked against the mints: a claim is issued in the table exactly
  when a `credits.mint` of the ledger names it.

A difference is reported by name (which row, which field, both values), never silently
fixed: the ledger is the evidence, and deciding which side is right is the operator's call.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.db.models import (
    Claim,
    ClaimCollection,
    CreditBalance,
    CreditMovement,
    CreditToken,
    Domain,
    DomainController,
    LedgerTransaction,
    Relationship,
)
from twinhub.services.claims import OUTCOMES, PENDING, claim_view
from twinhub.services.domains import stored_record

MAX_SHOWN = 120  # characters of a value shown in a difference


@dataclass(frozen=True)
class Difference:
    """One place where the tables and the replayed ledger disagree."""

    where: str  # e.g. "balance of did:ixo:entity/x in CARBON"
    problem: str  # e.g. "amount is 1001 in the table, 1 by the ledger"

    def __str__(self) -> str:
        return f"{self.where}: {self.problem}"


@dataclass
class ReplayedState:
    """What the ledger says the state is, built transaction by transaction."""

    balances: dict[tuple[str, str], list[int]] = field(
        default_factory=lambda: defaultdict(lambda: [0, 0])
    )  # (owner, token) -> [amount, retired]
    tokens: dict[str, list[int]] = field(
        default_factory=lambda: defaultdict(lambda: [0, 0])
    )  # token -> [minted, retired]
    movements: dict[int, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    domains: dict[str, dict[str, Any]] = field(default_factory=dict)
    claims: dict[str, dict[str, Any]] = field(default_factory=dict)
    minted_claims: set[str] = field(default_factory=set)  # claims a mint named

    def apply(self, kind: str, payload: dict[str, Any], height: int) -> None:
        if kind.startswith("credits."):
            self._move(kind.removeprefix("credits."), payload, height)
        elif kind.startswith("domain.") and "record" in payload:
            self.domains[payload["record"]["did"]] = payload["record"]
        elif kind in ("claims.submit", "claims.evaluate"):
            self.claims[payload["claim"]["id"]] = payload["claim"]

    def _move(self, kind: str, payload: dict[str, Any], height: int) -> None:
        token, amount = payload["token"], int(payload["amount"])
        sender, recipient = payload.get("from"), payload.get("to")
        self.movements[height] = (kind, payload)
        if kind == "mint":
            if payload.get("claim"):
                self.minted_claims.add(payload["claim"])
            self.tokens[token][0] += amount
            self.balances[(recipient, token)][0] += amount
        elif kind == "transfer":
            self.balances[(sender, token)][0] -= amount
            self.balances[(recipient, token)][0] += amount
        elif kind == "retire":
            self.tokens[token][1] += amount
            self.balances[(sender, token)][0] -= amount
            self.balances[(sender, token)][1] += amount


async def replay(
    sessions: async_sessionmaker[AsyncSession],
    batch: int = 2000,
    progress: Callable[[int], None] | None = None,
) -> ReplayedState:
    """Every transaction, in height order, applied to an empty state."""
    state, after = ReplayedState(), 0
    columns = (LedgerTransaction.height, LedgerTransaction.kind, LedgerTransaction.payload)
    while True:
        async with sessions() as session:
            rows = list(
                await session.execute(
                    select(*columns)
                    .where(LedgerTransaction.height > after)
                    .order_by(LedgerTransaction.height)
                    .limit(batch)
                )
            )
        if not rows:
            return state
        for height, kind, payload in rows:
            state.apply(kind, orjson.loads(payload), height)
        after = rows[-1][0]
        if progress:
            progress(after)


async def reconcile(
    sessions: async_sessionmaker[AsyncSession],
    batch: int = 2000,
    progress: Callable[[int], None] | None = None,
) -> list[Difference]:
    """Replay the ledger and compare it with the tables; every difference, in a stable order."""
    state = await replay(sessions, batch, progress)
    async with sessions() as session:
        differences = [
            *await _credits(session, state),
            *await _domains(session, state),
            *await _claims(session, state),
        ]
    return differences


def _shown(value: Any) -> str:
    text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 1] + "…"


def _fields(where: str, table: dict[str, Any], ledger: dict[str, Any]) -> list[Difference]:
    return [
        Difference(
            where,
            f"{key} is {_shown(table.get(key))} in the table, {_shown(ledger.get(key))} "
            "by the ledger",
        )
        for key in sorted(set(table) | set(ledger))
        if table.get(key) != ledger.get(key)
    ]


async def _credits(session: AsyncSession, state: ReplayedState) -> list[Difference]:
    found: list[Difference] = []
    tables = {
        (row.owner, row.token): [row.amount, row.retired]
        for row in await session.scalars(select(CreditBalance))
    }
    for owner, token in sorted(set(tables) | set(state.balances)):
        table, ledger = tables.get((owner, token), [0, 0]), state.balances.get((owner, token))
        ledger = ledger or [0, 0]
        where = f"balance of {owner} in {token}"
        found += _fields(
            where,
            {"amount": table[0], "retired": table[1]},
            {"amount": ledger[0], "retired": ledger[1]},
        )
    supplies = {
        row.name: [row.minted, row.retired] for row in await session.scalars(select(CreditToken))
    }
    for token in sorted(set(supplies) | set(state.tokens)):
        where = f"supply of {token}"
        if token not in supplies:
            found.append(Difference(where, "minted by the ledger but missing from the table"))
            continue
        table, ledger = supplies[token], state.tokens.get(token, [0, 0])
        found += _fields(
            where,
            {"minted": table[0], "retired": table[1]},
            {"minted": ledger[0], "retired": ledger[1]},
        )
    seen: set[int] = set()
    for row in await session.scalars(select(CreditMovement).order_by(CreditMovement.id)):
        where = f"credit movement {row.id} (height {row.ledger_height})"
        seen.add(row.ledger_height)
        recorded = state.movements.get(row.ledger_height)
        if recorded is None:
            found.append(Difference(where, "no credits transaction at that height"))
            continue
        kind, payload = recorded
        table = {
            "kind": row.kind,
            "token": row.token,
            "from": row.sender,
            "to": row.recipient,
            "amount": row.amount,
            "reason": row.reason,
            "claim": row.claim_id,
        }
        found += _fields(where, table, {"kind": kind, **payload})
    for height in sorted(set(state.movements) - seen):
        found.append(
            Difference(f"credits transaction at height {height}", "no credit_movements row")
        )
    return found


async def _domains(session: AsyncSession, state: ReplayedState) -> list[Difference]:
    found: list[Difference] = []
    edges: dict[str, list[Relationship]] = defaultdict(list)
    for edge in await session.scalars(select(Relationship)):
        edges[edge.source_did].append(edge)
    controllers: dict[str, set[str]] = defaultdict(set)
    for did, controller in await session.execute(
        select(DomainController.domain_did, DomainController.controller)
    ):
        controllers[did].add(controller)
    rows = {row.did: row for row in await session.scalars(select(Domain))}
    for did in sorted(set(rows) | set(state.domains)):
        where = f"domain {did}"
        row, ledger = rows.get(did), state.domains.get(did)
        if row is None:
            found.append(Difference(where, "recorded by the ledger but missing from the table"))
            continue
        if ledger is None:
            found.append(Difference(where, "in the table but never recorded by the ledger"))
            continue
        found += _fields(where, _plain(stored_record(row, edges.get(did, []))), ledger)
        if controllers.get(did, set()) != set(row.controller):
            found.append(
                Difference(
                    where,
                    f"domain_controllers holds {_shown(sorted(controllers.get(did, set())))}, "
                    f"the record {_shown(row.controller)}",
                )
            )
    return found


async def _claims(session: AsyncSession, state: ReplayedState) -> list[Difference]:
    found: list[Difference] = []
    rows = {row.id: row for row in await session.scalars(select(Claim))}
    for claim_id in sorted(set(rows) | set(state.claims)):
        where = f"claim {claim_id}"
        row, ledger = rows.get(claim_id), state.claims.get(claim_id)
        if row is None:
            found.append(Difference(where, "recorded by the ledger but missing from the table"))
        elif ledger is None:
            found.append(Difference(where, "in the table but never recorded by the ledger"))
        else:
            # Where its credits are (services.claim_issuance) is not in its own
            # transactions: an issuance changes it, and mints them (reconciled as movements).
            table = {k: v for k, v in _plain(claim_view(row)).items() if k != "credits"}
            found += _fields(where, table, {k: v for k, v in ledger.items() if k != "credits"})
            # An issuance marks its claims issued in the write whose mints name them
            # (services.claim_issuance.issue): issued exactly when a mint names the claim.
            # (An approval computing no credits is never carried, so never issued.)
            minted = claim_id in state.minted_claims
            if (row.issued_at is not None) != minted:
                found.append(
                    Difference(
                        where,
                        f"issued is {row.issued_at is not None} in the table (amount "
                        f"{row.amount}, period {row.period_id}), {minted} by the ledger "
                        f"({'a' if minted else 'no'} mint names it)",
                    )
                )
    # A collection's counters are those of its claims' current statuses, as replayed.
    replayed: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for view in state.claims.values():
        counts = replayed[view["collection"]]
        counts["count"] += 1
        counts["evaluated"] += view["status"] != PENDING
        if view["status"] in OUTCOMES:
            counts[view["status"]] += 1
    names = ("count", "evaluated", *OUTCOMES)
    for collection in await session.scalars(select(ClaimCollection).order_by(ClaimCollection.id)):
        counts = replayed.get(collection.id, {})
        found += _fields(
            f"claim collection {collection.id}",
            {name: getattr(collection, name) for name in names},
            {name: counts.get(name, 0) for name in names},
        )
    return found


def _plain(value: dict[str, Any]) -> dict[str, Any]:
    """The value as JSON would give it back (what the ledger's payload went through)."""
    result: dict[str, Any] = orjson.loads(orjson.dumps(value))
    return result
