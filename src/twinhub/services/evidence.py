"""Evidence that outlives the telemetry retention (issue 29 §6): holds on the readings behind
a submitted or issued monitoring period, and the readings of a device-period as evidence.

A hold names who holds (`holder`, e.g. "monitoring-period:12"), a device and a day range,
and keeps that device's readings (and their receipts) until `keep_until`: the end of the
project's crediting period plus EVIDENCE_RETENTION_YEARS. The retention job
(TelemetryStore.prune) deletes no held reading and drops no partition holding one. Day
rollups and project documents are never pruned, so a hold covers them by construction.

`evidence_readings` lists what stands behind a device's days: each reading with its time,
receipt time, seq and values, the signed batches or messages they came in (the bytes as
received, their signatures and what checks each), and the readings quarantined over those
days with their reasons. The evidence bundle of a monitoring period is made of these.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from sqlalchemy import and_, delete, exists, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from twinhub.db.models import (
    EvidenceHold,
    TelemetryDevice,
    TelemetryQuarantine,
    TelemetryReading,
    TelemetryReceipt,
)
from twinhub.kernel.clock import utcnow
from twinhub.kernel.errors import FieldProblem, Invalid
from twinhub.security.device_signatures import HMAC_SCHEME, SCHEME

READINGS = TelemetryReading.__table__
HOLDER_LENGTH = 200

# How each kind of signature on a receipt is checked, for whoever holds the evidence.
CHECKS = {
    SCHEME: (
        "Ed25519 signature (base58btc multibase) by publicKey over the RFC 8785 (JCS) "
        "canonical JSON of the parsed payload; anyone can check it"
    ),
    HMAC_SCHEME: (
        "hex HMAC-SHA256 of the payload bytes under the SHA-256 of deviceToken's secret; "
        "only the device and twinhub hold that key, so it proves receipt from the token's "
        "holder to twinhub, not to a third party"
    ),
}


def day_start(day: date) -> datetime:
    return datetime.combine(day, time(0), tzinfo=UTC)


def keep_until(crediting_period_end: date, years: int) -> date:
    """The first day the evidence may go: `years` after the crediting period's last day
    (29 February becomes 28 February in a year that has none)."""
    try:
        return crediting_period_end.replace(year=crediting_period_end.year + years)
    except ValueError:
        return crediting_period_end.replace(year=crediting_period_end.year + years, day=28)


async def hold_evidence(
    session: AsyncSession,
    holder: str,
    devices: Sequence[str],
    first: date,
    last: date,
    crediting_period_end: date,
    years: int,
) -> date:
    """Keep `devices`' readings from `first` to `last` (days, inclusive, UTC) until
    `years` (EVIDENCE_RETENTION_YEARS) after `crediting_period_end`, whatever the telemetry
    retention says; in the caller's transaction (a period's submission). Holding again for
    the same holder and device replaces that hold. Returns the keep-until day."""
    problems = []
    if not holder or len(holder) > HOLDER_LENGTH:
        problems.append(FieldProblem("holder", f"1 to {HOLDER_LENGTH} characters"))
    if last < first:
        problems.append(FieldProblem("to", "must not be before from"))
    if years < 0:
        problems.append(FieldProblem("years", "at least 0"))
    if problems:
        raise Invalid("The evidence hold is invalid.", problems)
    until = keep_until(crediting_period_end, years)
    unique = list(dict.fromkeys(devices))
    if not unique:
        return until
    await session.execute(
        delete(EvidenceHold).where(
            EvidenceHold.holder == holder, EvidenceHold.device_did.in_(unique)
        )
    )
    now = utcnow()
    start, end = day_start(first), day_start(last + timedelta(days=1))
    session.add_all(
        EvidenceHold(
            holder=holder,
            device_did=device,
            start=start,
            end=end,
            keep_until=until,
            created_at=now,
        )
        for device in unique
    )
    await session.flush()
    return until


async def release_evidence(session: AsyncSession, holder: str) -> int:
    """Drop `holder`'s holds (a period sent back to draft); the number dropped. Another
    holder's hold on the same readings still keeps them."""
    result = await session.execute(delete(EvidenceHold).where(EvidenceHold.holder == holder))
    return result.rowcount or 0


def held_reading(today: date) -> Any:
    """A condition on telemetry_readings: the reading is held by a hold still in force
    (for the retention job's DELETE)."""
    return exists(
        select(EvidenceHold.id)
        .join(TelemetryDevice, TelemetryDevice.did == EvidenceHold.device_did)
        .where(
            TelemetryDevice.id == READINGS.c.device_id,
            EvidenceHold.keep_until > today,
            EvidenceHold.start <= READINGS.c.time,
            EvidenceHold.end > READINGS.c.time,
        )
    )


def held_receipt(today: date) -> Any:
    """A condition on telemetry_receipts: some reading it carried may be held."""
    receipts = TelemetryReceipt.__table__
    return exists(
        select(EvidenceHold.id)
        .join(TelemetryDevice, TelemetryDevice.did == EvidenceHold.device_did)
        .where(
            TelemetryDevice.id == receipts.c.device_id,
            EvidenceHold.keep_until > today,
            EvidenceHold.start <= receipts.c.last_time,
            EvidenceHold.end > receipts.c.first_time,
        )
    )


async def held_ranges(session: AsyncSession, today: date) -> list[tuple[datetime, datetime]]:
    """The time ranges some hold in force covers (any device): whole stored months
    (PostgreSQL's partitions) overlapping one are not dropped."""
    rows = await session.execute(
        select(EvidenceHold.start, EvidenceHold.end).where(EvidenceHold.keep_until > today)
    )
    return [(start, end) for start, end in rows]


def receipt_record(row: TelemetryReceipt) -> dict[str, Any]:
    """A receipt as evidence: the bytes as received and each signature with how to check
    it."""
    return {
        "id": row.id,
        "receivedAt": row.received_at.isoformat(),
        "payload": row.payload,
        "signatures": [
            {**signature, "check": CHECKS.get(str(signature.get("type")), "unknown")}
            for signature in row.signatures
        ],
    }


def reading_record(
    seq: int, moment: datetime, values: dict[str, Any], received: datetime | None, receipt: Any
) -> dict[str, Any]:
    return {
        "seq": seq,
        "time": moment.isoformat(),
        "receivedAt": received.isoformat() if received is not None else None,
        "values": values,
        "receipt": receipt,
    }


def quarantine_record(row: TelemetryQuarantine) -> dict[str, Any]:
    return {
        "seq": row.seq,
        "time": row.time.isoformat(),
        "receivedAt": row.received_at.isoformat(),
        "values": row.values,
        "reason": row.reason,
        "source": row.source,
        "receipt": row.receipt_id,
    }


async def receipts_by_id(session: AsyncSession, ids: set[int]) -> dict[str, Any]:
    """The receipts of these ids as evidence records, keyed by id (as text: JSON keys)."""
    out: dict[str, Any] = {}
    wanted = sorted(ids)
    for offset in range(0, len(wanted), 500):
        rows = await session.scalars(
            select(TelemetryReceipt).where(TelemetryReceipt.id.in_(wanted[offset : offset + 500]))
        )
        for row in rows:
            out[str(row.id)] = receipt_record(row)
    return out


async def evidence_readings(
    session: AsyncSession, device: str, first: date, last: date
) -> dict[str, Any]:
    """Everything stored behind `device`'s days `first` to `last` (inclusive, UTC): its
    readings in time order (time, receivedAt, seq, values, receipt id: NULL when it came
    unsigned over HTTP, or was stored before receipts were kept), the receipts they name
    (payload and signatures, with what checks each) and the readings quarantined with their
    reasons that were timed or received on those days. `signed` counts the readings that
    came with a signature."""
    start, end = day_start(first), day_start(last + timedelta(days=1))
    device_id = await session.scalar(
        select(TelemetryDevice.id).where(TelemetryDevice.did == device)
    )
    readings: list[dict[str, Any]] = []
    receipt_ids: set[int] = set()
    if device_id is not None:
        rows = await session.execute(
            select(
                READINGS.c.seq,
                READINGS.c.time,
                READINGS.c["values"],
                READINGS.c.received_at,
                READINGS.c.receipt_id,
            )
            .where(
                and_(
                    READINGS.c.device_id == device_id,
                    READINGS.c.time >= start,
                    READINGS.c.time < end,
                )
            )
            .order_by(READINGS.c.time, READINGS.c.seq)
        )
        for seq, moment, values, received, receipt in rows:
            readings.append(reading_record(seq, moment, values, received, receipt))
            if receipt is not None:
                receipt_ids.add(receipt)
    held = list(
        await session.scalars(
            select(TelemetryQuarantine)
            .where(
                TelemetryQuarantine.device_did == device,
                or_(
                    and_(TelemetryQuarantine.time >= start, TelemetryQuarantine.time < end),
                    and_(
                        TelemetryQuarantine.received_at >= start,
                        TelemetryQuarantine.received_at < end,
                    ),
                ),
            )
            .order_by(TelemetryQuarantine.time, TelemetryQuarantine.seq)
        )
    )
    receipt_ids.update(row.receipt_id for row in held if row.receipt_id is not None)
    return {
        "device": device,
        "from": first.isoformat(),
        "to": last.isoformat(),
        "readings": readings,
        "signed": sum(1 for r in readings if r["receipt"] is not None),
        "receipts": await receipts_by_id(session, receipt_ids),
        "quarantined": [quarantine_record(row) for row in held],
    }
