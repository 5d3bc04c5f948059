"""Tables. Every schema change here comes with an Alembic migration in `migrations/versions`."""

from __future__ import annotations

import struct
from datetime import UTC, date, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Date,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    text,
    true,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from twinhub.db.dialects import COUNTED_CLAIM, ROLLUP_FIELD_SEPARATOR, dialect_of
from twinhub.kernel.clock import utcnow

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_name)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UtcDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC on every backend (SQLite keeps no zone of its own)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetimes are not stored; use UTC")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class Customer(Base):
    """A person who reaches twinhub from a phone: a USSD account with an encrypted PIN."""

    __tablename__ = "customers"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    customer_id: Mapped[str] = mapped_column(String(16), unique=True)
    phone_number: Mapped[str] = mapped_column(String(16), unique=True)
    full_name: Mapped[str] = mapped_column(String(80))
    pin_ciphertext: Mapped[bytes] = mapped_column(LargeBinary)
    failed_pin_attempts: Mapped[int] = mapped_column(Integer, default=0)
    locked_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    last_login_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow, onupdate=utcnow)


JsonDocument = JSON().with_variant(JSONB(), "postgresql")


class ApiKey(Base):
    """A bearer credential of the registry API; only a hash of its secret is kept."""

    __tablename__ = "api_keys"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    key_id: Mapped[str] = mapped_column(String(16), unique=True)
    secret_sha256: Mapped[str] = mapped_column(String(64))
    principal: Mapped[str] = mapped_column(String(200))
    roles: Mapped[list[str]] = mapped_column(JsonDocument)
    label: Mapped[str] = mapped_column(String(100), default="")
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)


class LedgerHead(Base):
    """One row: the newest height and hash. Locking it serialises appends across processes."""

    __tablename__ = "ledger_head"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    height: Mapped[int] = mapped_column(BigInteger, default=0)
    tx_hash: Mapped[str] = mapped_column(String(64), default="")


class LedgerTransaction(Base):
    """Append-only: every write of the registry, chained by hash to the one before."""

    __tablename__ = "ledger_transactions"

    height: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    tx_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prev_hash: Mapped[str] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(64))
    subject: Mapped[str] = mapped_column(String(200), index=True)
    actor: Mapped[str] = mapped_column(String(200))
    payload: Mapped[str] = mapped_column(Text)  # canonical JSON, exactly what was hashed
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)


class Protocol(Base):
    """A template: property types, relationship roles, services a domain inherits."""

    __tablename__ = "protocols"

    did: Mapped[str] = mapped_column(String(200), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    entity_type: Mapped[str | None] = mapped_column(String(64), nullable=True)
    twin_class: Mapped[str | None] = mapped_column(String(16), nullable=True)
    parent_did: Mapped[str | None] = mapped_column(
        String(200), ForeignKey("protocols.did"), nullable=True
    )
    properties: Mapped[dict[str, str]] = mapped_column(JsonDocument)
    required: Mapped[list[str]] = mapped_column(JsonDocument)
    relationships: Mapped[dict[str, str]] = mapped_column(JsonDocument)
    services: Mapped[list[dict[str, str]]] = mapped_column(JsonDocument)
    token_class: Mapped[str | None] = mapped_column(String(32), nullable=True)
    telemetry: Mapped[dict[str, object] | None] = mapped_column(JsonDocument, nullable=True)
    methodology: Mapped[dict[str, object] | None] = mapped_column(JsonDocument, nullable=True)
    seq: Mapped[int] = mapped_column(BigInteger, unique=True)
    version: Mapped[int] = mapped_column(Integer, default=1)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    # Ranges, allowed values and lengths of properties' values (services.protocols).
    constraints: Mapped[dict[str, dict[str, object]] | None] = mapped_column(
        JsonDocument, nullable=True
    )


class Domain(Base):
    """A digital twin: organisation, project, device, oracle, ... (an ixo entity)."""

    __tablename__ = "domains"
    __table_args__ = (
        Index("ix_domains_type_seq", "type", "seq"),
        Index("ix_domains_class_seq", "class_did", "seq"),
        Index("ix_domains_status_seq", "status", "seq"),
        Index("ix_domains_verified_seq", "verified", "seq"),
        # Serial numbers are unique per protocol (services.domains keeps `serial` in step
        # with properties.serialNumber).
        Index("uq_domains_class_serial", "class_did", "serial", unique=True),
        # Most domains have no parent and no owner: only those that do are indexed (every
        # read by parent or owner asks for a value, which implies NOT NULL), so a create
        # does not add two index entries nobody looks up.
        Index(
            "ix_domains_parent_did",
            "parent_did",
            postgresql_where=text("parent_did IS NOT NULL"),
            sqlite_where=text("parent_did IS NOT NULL"),
        ),
        Index(
            "ix_domains_owner_customer_id",
            "owner_customer_id",
            postgresql_where=text("owner_customer_id IS NOT NULL"),
            sqlite_where=text("owner_customer_id IS NOT NULL"),
        ),
    )

    did: Mapped[str] = mapped_column(String(200), primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, unique=True)  # creation order, for cursors
    type: Mapped[str] = mapped_column(String(64))
    class_did: Mapped[str] = mapped_column(String(200), ForeignKey("protocols.did"))
    twin_class: Mapped[str] = mapped_column(String(16))
    parent_did: Mapped[str | None] = mapped_column(String(200), nullable=True)
    controller: Mapped[list[str]] = mapped_column(JsonDocument)
    services: Mapped[list[dict[str, str]]] = mapped_column(JsonDocument)
    credentials: Mapped[list[dict[str, str]]] = mapped_column(JsonDocument)
    meta: Mapped[dict[str, object]] = mapped_column("metadata", JsonDocument)
    properties: Mapped[dict[str, object]] = mapped_column(JsonDocument)
    valid_from: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    valid_until: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    status: Mapped[str] = mapped_column(String(16), default="active")
    verified: Mapped[bool] = mapped_column(Boolean, default=False)
    version: Mapped[int] = mapped_column(Integer, default=1)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    serial: Mapped[str | None] = mapped_column(String(200), nullable=True)
    # The household a stove belongs to: a copy of properties.ownerCustomerId, kept by the
    # domain service on every write, so that "the stoves of customer X" is one indexed read.
    owner_customer_id: Mapped[str | None] = mapped_column(String(16), nullable=True)


class DomainController(Base):
    """Who controls which domain, one row each, so that filtering by controller is indexed."""

    __tablename__ = "domain_controllers"

    domain_did: Mapped[str] = mapped_column(
        String(200), ForeignKey("domains.did"), primary_key=True
    )
    controller: Mapped[str] = mapped_column(String(200), primary_key=True, index=True)


class Relationship(Base):
    """A typed edge of the domain graph: source --type--> target."""

    __tablename__ = "relationships"
    # Its first column serves the reads by source: no index of its own (migration 0018).
    __table_args__ = (UniqueConstraint("source_did", "type", "target_did"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    source_did: Mapped[str] = mapped_column(String(200), ForeignKey("domains.did"))
    type: Mapped[str] = mapped_column(String(64))
    target_did: Mapped[str] = mapped_column(String(200), ForeignKey("domains.did"), index=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class IdempotencyRecord(Base):
    """The first answer to a POST carrying an Idempotency-Key, replayed for repeats."""

    __tablename__ = "idempotency_records"
    __table_args__ = (UniqueConstraint("principal", "key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    principal: Mapped[str] = mapped_column(String(200))
    key: Mapped[str] = mapped_column(String(200))
    request_sha256: Mapped[str] = mapped_column(String(64))
    status_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    response: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class GovernanceGroup(Base):
    """A DAO group that decides by weighted vote (a compliance group verifies domains)."""

    __tablename__ = "governance_groups"

    did: Mapped[str] = mapped_column(String(200), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    threshold_kind: Mapped[str] = mapped_column(String(32))
    threshold: Mapped[float] = mapped_column(Float)
    quorum: Mapped[float | None] = mapped_column(Float, nullable=True)
    voting_period_seconds: Mapped[int] = mapped_column(Integer)
    is_default: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class GroupMember(Base):
    __tablename__ = "group_members"

    group_did: Mapped[str] = mapped_column(
        String(200), ForeignKey("governance_groups.did"), primary_key=True
    )
    member: Mapped[str] = mapped_column(String(200), primary_key=True)
    weight: Mapped[int] = mapped_column(Integer)


class Proposal(Base):
    """A verification (or revocation) proposal for one domain, decided by one group."""

    __tablename__ = "proposals"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    group_did: Mapped[str] = mapped_column(
        String(200), ForeignKey("governance_groups.did"), index=True
    )
    domain_did: Mapped[str] = mapped_column(String(200), ForeignKey("domains.did"), index=True)
    action: Mapped[str] = mapped_column(String(16))
    package: Mapped[dict[str, object]] = mapped_column(JsonDocument)
    proposer: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16))
    total_weight: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime)
    decided_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    executed_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    # A batch proposal's size and how many of its domains execution has done so far.
    items_total: Mapped[int | None] = mapped_column(Integer, nullable=True)
    items_done: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # When and why a batch's background execution last stopped short (it gave up after its
    # retries, or found the proposal no longer executable); cleared by the next chunk done.
    batch_stopped_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    batch_stopped_reason: Mapped[str | None] = mapped_column(String(300), nullable=True)


class ProposalItem(Base):
    """One domain of a batch verification proposal; `done` once execution verified it (or
    found it deactivated or verified already), so an interrupted execution resumes."""

    __tablename__ = "proposal_items"
    __table_args__ = (Index("ix_proposal_items_pending", "proposal_id", "done", "domain_did"),)

    proposal_id: Mapped[int] = mapped_column(Integer, ForeignKey("proposals.id"), primary_key=True)
    domain_did: Mapped[str] = mapped_column(String(200), primary_key=True)
    done: Mapped[bool] = mapped_column(Boolean, default=False)


class Vote(Base):
    __tablename__ = "votes"
    __table_args__ = (UniqueConstraint("proposal_id", "voter"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    proposal_id: Mapped[int] = mapped_column(Integer, ForeignKey("proposals.id"), index=True)
    voter: Mapped[str] = mapped_column(String(200))
    option: Mapped[str] = mapped_column(String(8))
    weight: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class ClaimCollection(Base):
    """Where agents submit claims about one verified project, under one claim protocol.

    The counters are kept in the row (changed in the same ledger write as the claim), so a
    collection's counts are one read however many claims it holds."""

    __tablename__ = "claim_collections"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(200))
    project_did: Mapped[str] = mapped_column(String(200), ForeignKey("domains.did"), index=True)
    protocol_did: Mapped[str] = mapped_column(String(200), ForeignKey("protocols.did"))
    admin: Mapped[str] = mapped_column(String(200))
    evaluators: Mapped[list[str]] = mapped_column(JsonDocument)
    state: Mapped[str] = mapped_column(String(16))
    quota: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    start_date: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    end_date: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    count: Mapped[int] = mapped_column(BigInteger, default=0)
    evaluated: Mapped[int] = mapped_column(BigInteger, default=0)
    approved: Mapped[int] = mapped_column(BigInteger, default=0)
    rejected: Mapped[int] = mapped_column(BigInteger, default=0)
    flagged: Mapped[int] = mapped_column(BigInteger, default=0)
    disputed: Mapped[int] = mapped_column(BigInteger, default=0)
    invalidated: Mapped[int] = mapped_column(BigInteger, default=0)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class Claim(Base):
    """An agent's statement about a project (often about one of its assets), to be evaluated."""

    __tablename__ = "claims"
    __table_args__ = (
        Index("ix_claims_collection_seq", "collection_id", "seq"),
        Index("ix_claims_asset_seq", "asset_did", "seq"),
        Index("ix_claims_agent_seq", "agent", "seq"),
        # An oracle's "pending claims of my collection" must not walk the evaluated ones.
        Index("ix_claims_collection_status_seq", "collection_id", "status", "seq"),
        Index("ix_claims_status_seq", "status", "seq"),
        # One counted claim per stove and reporting period, whatever the channel; a rejected
        # or invalidated one frees its period for a corrected report.
        Index(
            "uq_claims_asset_period",
            "asset_did",
            "period",
            unique=True,
            postgresql_where=text(COUNTED_CLAIM),
            sqlite_where=text(COUNTED_CLAIM),
        ),
    )

    id: Mapped[str] = mapped_column(String(100), primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, unique=True)
    collection_id: Mapped[int] = mapped_column(Integer, ForeignKey("claim_collections.id"))
    agent: Mapped[str] = mapped_column(String(200))
    asset_did: Mapped[str | None] = mapped_column(
        String(200), ForeignKey("domains.did"), nullable=True
    )
    data: Mapped[dict[str, object]] = mapped_column(JsonDocument)
    status: Mapped[str] = mapped_column(String(16))
    oracle: Mapped[str | None] = mapped_column(String(200), nullable=True)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    amount: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    credential_id: Mapped[str | None] = mapped_column(String(100), nullable=True)
    submitted_at: Mapped[datetime] = mapped_column(UtcDateTime)
    evaluated_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    # The reporting period ("2026-11") of a periodic claim about an asset (services.claims).
    period: Mapped[str | None] = mapped_column(String(16), nullable=True)
    # The id of its claim.submitted event: the cause of its evaluation's events.
    submitted_event: Mapped[str | None] = mapped_column(String(40), nullable=True)
    # An approved claim's credits come with issuance (oracle.period_workflow): the
    # monitoring period of its project that carries it (from its submission), and when
    # that period's issuance minted them.
    period_id: Mapped[int | None] = mapped_column(Integer, nullable=True, index=True)
    issued_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    # What an approval with credits computed them from (mrv.period_inputs.claim_inputs):
    # the stove's facts and day figures, for the evidence bundle of the period carrying it.
    # JSON text written by orjson (as a credential's document): a bulk approval writes a
    # thousand of them. Deferred: read by the bundle only, not by every claim listing.
    inputs: Mapped[str | None] = mapped_column(Text, nullable=True, deferred=True)


class Evaluation(Base):
    """One oracle decision on a claim; a flagged claim may collect several."""

    __tablename__ = "evaluations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    claim_id: Mapped[str] = mapped_column(String(100), ForeignKey("claims.id"), index=True)
    oracle: Mapped[str] = mapped_column(String(200))
    actor: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    amount: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)


class Credential(Base):
    """A signed W3C verifiable credential, kept exactly as issued."""

    __tablename__ = "credentials"

    id: Mapped[str] = mapped_column(String(100), primary_key=True)
    # The approved claim it speaks for; None for a step of the verification workflow
    # (accreditation, validation, a monitoring period's submission, verification, issuance),
    # which `kind`, `project_did` and `period_id` place instead (revision 0022).
    claim_id: Mapped[str | None] = mapped_column(
        String(100), ForeignKey("claims.id"), unique=True, nullable=True
    )
    subject: Mapped[str] = mapped_column(String(200), index=True)
    issuer: Mapped[str] = mapped_column(String(200))
    document: Mapped[str] = mapped_column(Text)
    issued_at: Mapped[datetime] = mapped_column(UtcDateTime)
    kind: Mapped[str | None] = mapped_column(String(80), nullable=True)
    project_did: Mapped[str | None] = mapped_column(String(200), nullable=True, index=True)
    period_id: Mapped[int | None] = mapped_column(Integer, nullable=True, index=True)
    digest: Mapped[str | None] = mapped_column(String(80), nullable=True)  # JCS, of `document`


class CreditToken(Base):
    """A class of credits (CARBON, ...): what was minted and retired in all."""

    __tablename__ = "credit_tokens"

    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    protocol_did: Mapped[str] = mapped_column(String(200))
    minted: Mapped[int] = mapped_column(BigInteger, default=0)
    retired: Mapped[int] = mapped_column(BigInteger, default=0)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    # Amounts are counted in the token's smallest unit: 10^-decimals of a credit (0 for
    # tokens minted before methodologies computed fractional credits).
    decimals: Mapped[int] = mapped_column(Integer, default=0, server_default="0")


class CreditBalance(Base):
    __tablename__ = "credit_balances"

    owner: Mapped[str] = mapped_column(String(200), primary_key=True)
    token: Mapped[str] = mapped_column(
        String(32), ForeignKey("credit_tokens.name"), primary_key=True
    )
    amount: Mapped[int] = mapped_column(BigInteger, default=0)
    retired: Mapped[int] = mapped_column(BigInteger, default=0)


class CreditMovement(Base):
    """Every mint, transfer and retirement (the ledger holds them too, hash-chained)."""

    __tablename__ = "credit_movements"
    __table_args__ = (
        Index("ix_credit_movements_sender", "sender", "id"),
        Index("ix_credit_movements_recipient", "recipient", "id"),
        # A token's retirements and transfers (the chain node's token queries), not a scan
        # of every mint (migration 0016).
        Index("ix_credit_movements_token_kind", "token", "kind", "id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(16))
    token: Mapped[str] = mapped_column(String(32), ForeignKey("credit_tokens.name"))
    sender: Mapped[str | None] = mapped_column(String(200), nullable=True)
    recipient: Mapped[str | None] = mapped_column(String(200), nullable=True)
    amount: Mapped[int] = mapped_column(BigInteger)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    claim_id: Mapped[str | None] = mapped_column(String(100), nullable=True)
    actor: Mapped[str] = mapped_column(String(200))
    ledger_height: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)


# -- hardening: PIN lock-outs (revision 0006) -----------------------------------------------
class PinLockout(Base):
    """Wrong-PIN counting for one key: `account:<customer id>` (guesses from other phones),
    `own:<customer id>` (from the account's own phone) or `phone:<number>` (one phone's
    guesses at any account, unknown IDs included). Each lock-out lasts longer than the last
    (`lockouts` of them so far), and every one ends by itself."""

    __tablename__ = "pin_lockouts"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    failed_attempts: Mapped[int] = mapped_column(Integer, default=0)
    lockouts: Mapped[int] = mapped_column(Integer, default=0)
    locked_until: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True, index=True)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow, onupdate=utcnow)


# -- Events and webhooks (issue 17) --------------------------------------------------------
# An outbox: events are inserted in the transaction of the change they describe, with no
# position; the sequencer (twinhub.events.sequencer) numbers committed ones in order.

BigId = BigInteger().with_variant(Integer, "sqlite")  # SQLite autoincrements INTEGER only


class Event(Base):
    """Something of note that happened; `position` orders them once committed."""

    __tablename__ = "events"
    __table_args__ = (Index("ix_events_type_position", "type", "position"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    event_id: Mapped[str] = mapped_column(String(40), unique=True)
    position: Mapped[int | None] = mapped_column(BigInteger, nullable=True, unique=True)
    type: Mapped[str] = mapped_column(String(64))
    subject: Mapped[str] = mapped_column(String(200))
    actor: Mapped[str] = mapped_column(String(200))
    data: Mapped[str] = mapped_column(Text)  # JSON, exactly what readers and webhooks get
    ledger_height: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    occurred_at: Mapped[datetime] = mapped_column(UtcDateTime)
    # The event that caused this one, and the first event of its chain (kernel.bus.Cause):
    # a webhook delivery traced back through the credit and the claim. Not in the JSON.
    causation_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
    correlation_id: Mapped[str | None] = mapped_column(String(40), nullable=True)


# What the sequencer looks for, kept small: only rows not yet numbered are in it.
Index(
    "ix_events_unsequenced",
    Event.id,
    postgresql_where=Event.position.is_(None),
    sqlite_where=Event.position.is_(None),
)


class WebhookSubscription(Base):
    """A receiver of events; its signing secret is kept encrypted (it is needed to sign)."""

    __tablename__ = "webhook_subscriptions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    webhook_id: Mapped[str] = mapped_column(String(40), unique=True)
    url: Mapped[str] = mapped_column(Text)
    event_types: Mapped[list[str]] = mapped_column(JsonDocument)  # empty: every type
    secret_ciphertext: Mapped[bytes] = mapped_column(LargeBinary)
    description: Mapped[str] = mapped_column(String(200), default="")
    created_by: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    deleted_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    # Delivered for whose eyes (db.visibility): everything (an admin's or the registry's),
    # or what `created_by` may see.
    sees_everything: Mapped[bool] = mapped_column(Boolean, default=True, server_default=true())
    # active, or disabled: its receiver failed for WEBHOOK_DISABLE_AFTER_SECONDS.
    state: Mapped[str] = mapped_column(String(16), default="active", server_default="active")
    failing_since: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    disabled_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)


class WebhookDelivery(Base):
    """One event for one subscription: pending until a 2xx, failed after the retry horizon."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        UniqueConstraint("subscription_id", "event_pk"),
        Index("ix_webhook_deliveries_due", "status", "next_attempt_at"),
        Index("ix_webhook_deliveries_subscription_id", "subscription_id", "id"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    subscription_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("webhook_subscriptions.id", ondelete="CASCADE")
    )
    event_pk: Mapped[int] = mapped_column(BigInteger, ForeignKey("events.id"))
    status: Mapped[str] = mapped_column(String(16))  # pending | delivered | failed
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    window_started_at: Mapped[datetime] = mapped_column(UtcDateTime)  # retry horizon from here
    last_attempt_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    last_status_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    delivered_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)


class WebhookAttempt(Base):
    """One HTTP request of a delivery: the delivery log."""

    __tablename__ = "webhook_attempts"
    __table_args__ = (Index("ix_webhook_attempts_delivery_id", "delivery_id", "id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    delivery_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("webhook_deliveries.id", ondelete="CASCADE")
    )
    attempted_at: Mapped[datetime] = mapped_column(UtcDateTime)
    status_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    duration_ms: Mapped[float] = mapped_column(Float)
    response_excerpt: Mapped[str | None] = mapped_column(Text, nullable=True)


# -- collection members and agent deposits (chain surface: ixo's MemberBudget and
#    AgentDepositBalance; see services/collection_members.py) ------------------------------
class CollectionMember(Base):
    """An agent taking part in a claim collection: its evaluators, and every agent that has
    submitted a claim to it. The budget columns follow ixo's MemberBudget; twinhub sets
    no budgets, so they stay empty (period 0, no limit, nothing spent)."""

    __tablename__ = "collection_members"
    __table_args__ = (
        UniqueConstraint("collection_id", "member"),
        Index("ix_collection_members_collection_seq", "collection_id", "seq"),
    )

    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    collection_id: Mapped[int] = mapped_column(Integer, ForeignKey("claim_collections.id"))
    member: Mapped[str] = mapped_column(String(200))
    role: Mapped[str] = mapped_column(String(16))  # "evaluator" or "agent"
    period_seconds: Mapped[int] = mapped_column(BigInteger, default=0)
    spend_limit: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    spent: Mapped[int] = mapped_column(BigInteger, default=0)
    period_reset_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    joined_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class AgentDeposit(Base):
    """What an agent has deposited with a collection, per denomination, and from when it
    may be withdrawn. twinhub's collections require no deposit, so rows appear only when
    one is recorded."""

    __tablename__ = "agent_deposits"
    __table_args__ = (UniqueConstraint("collection_id", "agent", "denom"),)

    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    collection_id: Mapped[int] = mapped_column(Integer, ForeignKey("claim_collections.id"))
    agent: Mapped[str] = mapped_column(String(200))
    denom: Mapped[str] = mapped_column(String(64))
    amount: Mapped[int] = mapped_column(BigInteger)
    withdrawable_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)


# -- telemetry (issue 12) ------------------------------------------------------------------
class DeviceToken(Base):
    """A device's credential for writing its own twin's telemetry; only a hash is kept."""

    __tablename__ = "device_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    token_id: Mapped[str] = mapped_column(String(16), unique=True)
    domain_did: Mapped[str] = mapped_column(String(200), ForeignKey("domains.did"), index=True)
    secret_sha256: Mapped[str] = mapped_column(String(64))
    label: Mapped[str] = mapped_column(String(100), default="")
    created_by: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)


class TelemetryDevice(Base):
    """A twin that reports telemetry: a small integer id for the readings, and its live
    state (latest value of each field, meter total, last reading)."""

    __tablename__ = "telemetry_devices"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    did: Mapped[str] = mapped_column(String(200), ForeignKey("domains.did"), unique=True)
    last_time: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    last_seq: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    latest: Mapped[dict[str, object]] = mapped_column(JsonDocument)
    meter: Mapped[float | None] = mapped_column(Float, nullable=True)
    readings: Mapped[int] = mapped_column(BigInteger, default=0)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class TelemetryReading(Base):
    """One raw reading. On PostgreSQL the table is range-partitioned by month on `time`
    (see migration 0009); the key there is (device_id, time, seq)."""

    __tablename__ = "telemetry_readings"

    device_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    seq: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    time: Mapped[datetime] = mapped_column(UtcDateTime, primary_key=True)
    values: Mapped[dict[str, object]] = mapped_column(JsonDocument)
    # When twinhub received it (NULL: stored before revision 0021), and the signed batch or
    # message it came in (TelemetryReceipt; NULL: an unsigned HTTP batch).
    received_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    receipt_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)


class TelemetryReceipt(Base):
    """A signed batch (HTTP, Ed25519) or MQTT message (HMAC, and Ed25519 when the device
    has a key) exactly as it arrived, with its signatures: what a reading's signature is
    checked against again, later, by anyone holding the key (telemetry/signatures.py).
    `first_time`/`last_time` bound its readings' times, for the retention job."""

    __tablename__ = "telemetry_receipts"
    __table_args__ = (Index("ix_telemetry_receipts_device_last", "device_id", "last_time"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    device_id: Mapped[int] = mapped_column(Integer)
    received_at: Mapped[datetime] = mapped_column(UtcDateTime)
    first_time: Mapped[datetime] = mapped_column(UtcDateTime)
    last_time: Mapped[datetime] = mapped_column(UtcDateTime)
    payload: Mapped[str] = mapped_column(Text)
    signatures: Mapped[list[dict[str, object]]] = mapped_column(JsonDocument)


class DeviceKey(Base):
    """A device's Ed25519 public key (multibase, as in a did:key), enrolled with its twin;
    at most one current per twin, the rotated ones kept (older receipts name them)."""

    __tablename__ = "device_keys"
    __table_args__ = (
        Index(
            "uq_device_keys_current",
            "domain_did",
            unique=True,
            postgresql_where=text("revoked_at IS NULL"),
            sqlite_where=text("revoked_at IS NULL"),
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    domain_did: Mapped[str] = mapped_column(String(200), ForeignKey("domains.did"), index=True)
    public_key: Mapped[str] = mapped_column(String(100))
    created_by: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)


class TelemetryQuarantine(Base):
    """A reading kept out of the data: timed before its device's enrolment or too far from
    its receipt time (issue 30 §6). Stored with its reason; never rolled up or credited."""

    __tablename__ = "telemetry_quarantine"
    __table_args__ = (UniqueConstraint("device_did", "seq"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    device_did: Mapped[str] = mapped_column(String(200))
    seq: Mapped[int] = mapped_column(BigInteger)
    time: Mapped[datetime] = mapped_column(UtcDateTime)
    received_at: Mapped[datetime] = mapped_column(UtcDateTime)
    values: Mapped[dict[str, object]] = mapped_column(JsonDocument)
    reason: Mapped[str] = mapped_column(String(200))
    source: Mapped[str] = mapped_column(String(8))
    receipt_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)


class EvidenceHold(Base):
    """A device's readings and day rollups from `start` to `end` kept until `keep_until`,
    whatever TELEMETRY_RETENTION_DAYS says: they back a submitted or issued monitoring
    period (`holder` names it). services/evidence.py writes them; the pruner reads them."""

    __tablename__ = "evidence_holds"
    __table_args__ = (UniqueConstraint("holder", "device_did"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    holder: Mapped[str] = mapped_column(String(200))
    device_did: Mapped[str] = mapped_column(String(200), index=True)
    start: Mapped[datetime] = mapped_column(UtcDateTime)
    end: Mapped[datetime] = mapped_column(UtcDateTime)
    keep_until: Mapped[date] = mapped_column(Date)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class RollupFields(TypeDecorator[tuple[str, ...]]):
    """A wide rollup row's field names, sorted (telemetry/wide.py): a tuple in Python, the
    column each database's (db.dialects' rollup_columns: text joined on SQLite, text[] on
    PostgreSQL)."""

    impl = Text
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> Any:
        return dialect.type_descriptor(dialect_of(dialect).rollup_columns()[0])

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        return None if value is None else dialect_of(dialect).bind_rollup(tuple(value), None)

    def process_result_value(self, value: Any, dialect: Dialect) -> tuple[str, ...] | None:
        if value is None:
            return None
        if isinstance(value, str):
            return tuple(value.split(ROLLUP_FIELD_SEPARATOR)) if value else ()
        return tuple(value)


class RollupCells(TypeDecorator[bytes]):
    """A wide rollup row's (count, sum, min, max) per field as float64 (telemetry/wide.py):
    the little-endian bytes in Python whatever the column (a blob on SQLite, float8[] on
    PostgreSQL, whose upsert adds arrays); no float goes through text."""

    impl = LargeBinary
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> Any:
        return dialect.type_descriptor(dialect_of(dialect).rollup_columns()[1])

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        return None if value is None else dialect_of(dialect).bind_rollup(None, value)

    def process_result_value(self, value: Any, dialect: Dialect) -> bytes | None:
        if value is None or isinstance(value, bytes):
            return value
        return struct.pack(f"<{len(value)}d", *value)


def rollup_figures(
    fields: tuple[str, ...], cells: bytes
) -> dict[str, tuple[int, float, float, float]]:
    """{field: (count, sum, min, max)} of a wide rollup row as the ORM reads it."""
    values = struct.unpack(f"<{len(cells) // 8}d", cells)
    return {
        name: (int(values[4 * n]), values[4 * n + 1], values[4 * n + 2], values[4 * n + 3])
        for n, name in enumerate(fields)
    }


class TelemetryRollup(Base):
    """count/sum/min/max of each numeric field over one hour, day or month, for a device or
    for a project or organisation over its assets; kept as readings arrive. One row per
    (scope, interval, bucket), its fields' cells in one (0031: telemetry/wide.py)."""

    __tablename__ = "telemetry_rollups"
    # SQLite: the rows live in the primary key's B-tree, one search a read or upsert (0030).
    __table_args__ = ({"sqlite_with_rowid": False},)

    scope: Mapped[str] = mapped_column(String(200), primary_key=True)
    interval: Mapped[str] = mapped_column(String(8), primary_key=True)
    bucket: Mapped[datetime] = mapped_column(UtcDateTime, primary_key=True)
    fields: Mapped[tuple[str, ...]] = mapped_column(RollupFields)
    cells: Mapped[bytes] = mapped_column(RollupCells)


class TelemetryDayDigest(Base):
    """A device's stove-days of one month as drafts digest them, kept so the next draft need
    not read their readings again (services/day_digests.py, revision 0033): one row a device
    and month (a draft reads 30 times fewer rows than with one a day), its days in `days`,
    `{"YYYY-MM-DD": [readings, first seq, last seq, runs of seqs or null, digest]}` (null:
    one run, first to last), made as `form` says. Readings are only ever added, so a day
    that still holds as many readings holds the same ones; one that does not is digested
    again from its readings. Never evidence: a verifier's recomputation reads the readings
    themselves."""

    __tablename__ = "telemetry_day_digests"
    __table_args__ = ({"sqlite_with_rowid": False},)

    device_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    month: Mapped[date] = mapped_column(Date, primary_key=True)  # its first day
    form: Mapped[int] = mapped_column(Integer)
    days: Mapped[dict[str, list[Any]]] = mapped_column(JsonDocument)


# -- USSD languages and stove problems (issue 17, revision 0012) ----------------------------
class UssdLanguage(Base):
    """A USSD menu language remembered for `phone:<number>` (before log-in) or
    `customer:<customer id>` (once logged in); a code no longer served falls back."""

    __tablename__ = "ussd_languages"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    language: Mapped[str] = mapped_column(String(16))
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow, onupdate=utcnow)


class StoveProblem(Base):
    """A problem a household reported about its stove over USSD: the support queue's rows.
    Its `stove.problem_reported` event is written in the same transaction, and so is the
    `stove.problem_resolved` of an operator who resolves it (status open -> resolved)."""

    __tablename__ = "stove_problems"
    # One open problem per stove and kind, even when two reports arrive at the same instant.
    __table_args__ = (
        Index(
            "uq_stove_problems_open",
            "stove_did",
            "kind",
            unique=True,
            postgresql_where=text("status = 'open'"),
            sqlite_where=text("status = 'open'"),
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    reference: Mapped[str] = mapped_column(String(16), unique=True)
    stove_did: Mapped[str] = mapped_column(String(200), index=True)
    customer_id: Mapped[str] = mapped_column(String(16), index=True)
    kind: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(16), default="open", index=True)
    reported_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    closed_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    resolved_by: Mapped[str | None] = mapped_column(String(200), nullable=True)  # a DID
    resolution_note: Mapped[str | None] = mapped_column(String(500), nullable=True)


# -- oracle (issue 18) ---------------------------------------------------------------------
class OracleDecision(Base):
    """The oracle's signed decision on one claim, and while it works, its lease: the row is
    taken by one oracle process at a time; a lease that runs out is taken over."""

    __tablename__ = "oracle_decisions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    claim_id: Mapped[str] = mapped_column(String(100), ForeignKey("claims.id"), unique=True)
    state: Mapped[str] = mapped_column(String(16))  # leased | decided
    owner: Mapped[str | None] = mapped_column(String(100), nullable=True)
    lease_until: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    oracle: Mapped[str | None] = mapped_column(String(200), nullable=True)
    outcome: Mapped[str | None] = mapped_column(String(16), nullable=True)
    reasons: Mapped[list[str]] = mapped_column(JsonDocument)
    inputs_digest: Mapped[str | None] = mapped_column(String(64), nullable=True)
    methodology: Mapped[dict[str, object] | None] = mapped_column(JsonDocument, nullable=True)
    amount: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    document: Mapped[str | None] = mapped_column(Text, nullable=True)  # the signed decision
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    decided_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)


class MonitoringPeriod(Base):
    """One project's monitoring period: its report (exactly as issued) and its claim."""

    __tablename__ = "monitoring_periods"
    __table_args__ = (UniqueConstraint("project_did", "start", "end"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    project_did: Mapped[str] = mapped_column(String(200))
    start: Mapped[date] = mapped_column(Date)
    end: Mapped[date] = mapped_column(Date)
    claim_id: Mapped[str | None] = mapped_column(String(100), nullable=True)
    amount: Mapped[int] = mapped_column(BigInteger)
    report_digest: Mapped[str] = mapped_column(String(64))
    report: Mapped[str] = mapped_column(Text)
    actor: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    # The verification workflow (revision 0022): draft -> submitted -> verified | rejected
    # (or back to draft on corrections) -> issued. Periods made before it were issued.
    state: Mapped[str] = mapped_column(String(16), default="draft", server_default="issued")
    proponent: Mapped[str | None] = mapped_column(String(200), nullable=True)
    inputs: Mapped[str | None] = mapped_column(Text, nullable=True)  # the snapshot (JSON)
    findings: Mapped[str | None] = mapped_column(Text, nullable=True)  # the verifier's (JSON)
    updated_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)


class PeriodDraft(Base):
    """A monitoring period being drafted in the background (a programme too large to draft
    within one request's deadline): who asked, how far it is, and how it ended (the period,
    or the error the request would have answered). Kept in the database so that any worker
    answers for it."""

    __tablename__ = "period_drafts"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    project_did: Mapped[str] = mapped_column(String(200), index=True)
    start: Mapped[date] = mapped_column(Date)
    end: Mapped[date] = mapped_column(Date)
    actor: Mapped[str] = mapped_column(String(200))
    state: Mapped[str] = mapped_column(String(16))  # drafting, done, failed
    step: Mapped[str] = mapped_column(String(32))  # what it is doing now, for a person
    done: Mapped[int] = mapped_column(Integer, default=0)  # stoves whose readings are read
    total: Mapped[int] = mapped_column(Integer, default=0)
    period_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)  # the JSON error body
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)


class ProjectDocument(Base):
    """A project design document as the proponent stored it; `digest` is its JCS SHA-256,
    which a verifier's validation credential names."""

    __tablename__ = "project_documents"
    __table_args__ = (UniqueConstraint("project_did", "digest"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    project_did: Mapped[str] = mapped_column(String(200), index=True)
    digest: Mapped[str] = mapped_column(String(80))
    document: Mapped[str] = mapped_column(Text)
    actor: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class Attachment(Base):
    """Evidence a document cites (a test certificate, a calibration record, a source's
    table), stored by the SHA-256 of its bytes."""

    __tablename__ = "attachments"

    digest: Mapped[str] = mapped_column(String(80), primary_key=True)  # sha256:<hex>
    content: Mapped[bytes] = mapped_column(LargeBinary)
    media_type: Mapped[str] = mapped_column(String(100))
    size: Mapped[int] = mapped_column(Integer)
    actor: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class CreditedDay(Base):
    """One device's day, credited (or reserved by a submitted period): one stove-day, one
    credit across the registry. `device` is the device's identity (its serial and meter
    serial, normalised), so the same stove listed by two projects is one device."""

    __tablename__ = "credited_days"

    device: Mapped[str] = mapped_column(String(200), primary_key=True)
    day: Mapped[date] = mapped_column(Date, primary_key=True)
    stove_did: Mapped[str] = mapped_column(String(200))
    project_did: Mapped[str] = mapped_column(String(200))
    period_id: Mapped[int | None] = mapped_column(Integer, nullable=True, index=True)
    claim_id: Mapped[str | None] = mapped_column(String(100), nullable=True, index=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


# -- surveys (issue 30) --------------------------------------------------------------------
class Survey(Base):
    """A programme's household survey: its seed, its target (confidence, precision), the
    answers' range, and once drawn, its frame (size and digest) and sample size. Drawn once
    (status created -> drawn, by one conditional UPDATE)."""

    __tablename__ = "surveys"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    project_did: Mapped[str] = mapped_column(String(200), index=True)
    seed: Mapped[str] = mapped_column(String(64))
    confidence: Mapped[float] = mapped_column(Float)
    target_precision: Mapped[float] = mapped_column(Float)
    expected_cv: Mapped[float] = mapped_column(Float)
    planned_size: Mapped[int | None] = mapped_column(Integer, nullable=True)
    household_min: Mapped[int] = mapped_column(Integer)
    household_max: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16))
    frame_size: Mapped[int | None] = mapped_column(Integer, nullable=True)
    frame_digest: Mapped[str | None] = mapped_column(String(71), nullable=True)
    sample_size: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_by: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    drawn_by: Mapped[str | None] = mapped_column(String(200), nullable=True)
    drawn_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)


class SurveyHousehold(Base):
    """One stove of a survey's sample and the household that owns it, in draw order, with
    the household size recorded at enrolment (the stove's property when drawn)."""

    __tablename__ = "survey_households"
    __table_args__ = (UniqueConstraint("survey_id", "stove_did"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    survey_id: Mapped[str] = mapped_column(String(32), ForeignKey("surveys.id"))
    position: Mapped[int] = mapped_column(Integer)
    stove_did: Mapped[str] = mapped_column(String(200))
    customer_id: Mapped[str] = mapped_column(String(16), index=True)
    recorded_household_size: Mapped[int | None] = mapped_column(Integer, nullable=True)
    completed_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)


class SurveyAnswer(Base):
    """One answer of a sampled household, once per question, with the USSD session and
    phone that gave it (the evidence) and the language it was asked in."""

    __tablename__ = "survey_answers"
    __table_args__ = (UniqueConstraint("survey_id", "stove_did", "question"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    survey_id: Mapped[str] = mapped_column(String(32), ForeignKey("surveys.id"))
    stove_did: Mapped[str] = mapped_column(String(200))
    question: Mapped[str] = mapped_column(String(32))
    value: Mapped[str] = mapped_column(String(32))
    session_id: Mapped[str] = mapped_column(String(100))
    phone_number: Mapped[str] = mapped_column(String(16))
    language: Mapped[str] = mapped_column(String(16))
    answered_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
