"""Customer accounts: creation, PIN login with lock-out, PIN change, unlock.

Wrong PINs are counted under three keys (table `pin_lockouts`): the account, for guesses
from phones other than its own; the account's own phone; and the guessing phone, at any
account (unknown IDs included). Reaching a key's limit locks it for USSD_LOCKOUT_SECONDS,
doubling with each further lock-out up to USSD_LOCKOUT_MAX_SECONDS; every lock ends by itself
and an operator may lift it early. A stranger can therefore lock an account only against
other strangers (never against its owner's phone), and not for long; one phone cannot guess
its way through many accounts. Counts change by atomic UPDATE statements, so parallel
guesses from many sessions cannot slip past a limit.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.db.dialects import dialect_of
from twinhub.db.models import Customer, PinLockout
from twinhub.kernel.clock import utcnow
from twinhub.logging import get_logger
from twinhub.security.pins import PinCipher
from twinhub.services.customer_ids import new_customer_id

log = get_logger(__name__)

NAME_MIN, NAME_MAX = 2, 40
_NAME_CHARS = re.compile(r"^[^\W\d_]+(?:[ '.\-][^\W\d_]+)*\.?$")


def clean_full_name(raw: str) -> str | None:
    """A tidy display name, or None when the input cannot be a person's name."""
    name = " ".join(unicodedata.normalize("NFC", raw).split())
    if not NAME_MIN <= len(name) <= NAME_MAX or not _NAME_CHARS.match(name):
        return None
    return name


@dataclass(frozen=True, slots=True)
class CustomerView:
    customer_id: str
    phone_number: str
    full_name: str
    created_at: datetime
    locked: bool


class LoginOutcome(StrEnum):
    ok = "ok"
    wrong_pin = "wrong_pin"
    locked = "locked"
    unknown = "unknown"


@dataclass(frozen=True, slots=True)
class LoginResult:
    """`attempts_left` and `locked_seconds` concern the caller's own account (the phone is
    the account's), or the phone itself when it is the phone that is locked."""

    outcome: LoginOutcome
    customer: CustomerView | None = None
    attempts_left: int = 0
    locked_seconds: int = 0
    phone_locked: bool = False


@dataclass(frozen=True, slots=True)
class Lockout:
    """One lock-out an operator can see and lift."""

    key: str
    failed_attempts: int
    lockouts: int
    locked_until: datetime | None


class PhoneAlreadyRegistered(Exception):
    """The phone number already has an account."""


def _view(row: Customer) -> CustomerView:
    return CustomerView(
        customer_id=row.customer_id,
        phone_number=row.phone_number,
        full_name=row.full_name,
        created_at=row.created_at,
        locked=row.locked_at is not None,
    )


def _pin_context(customer_id: str) -> str:
    return f"customer-pin:{customer_id}"


class CustomerService:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        cipher: PinCipher,
        max_pin_attempts: int,
        phone_max_pin_attempts: int = 10,
        lockout_seconds: float = 60.0,
        lockout_max_seconds: float = 3600.0,
    ) -> None:
        self._sessions = sessions
        self._cipher = cipher
        self.max_pin_attempts = max_pin_attempts
        self.phone_max_pin_attempts = phone_max_pin_attempts
        self._lockout = lockout_seconds
        self._lockout_max = lockout_max_seconds

    async def create(self, phone_number: str, full_name: str, pin: str) -> CustomerView:
        """Open an account; raises PhoneAlreadyRegistered when the phone has one."""
        for _ in range(5):  # a fresh random ID on the rare collision
            customer_id = new_customer_id()
            row = Customer(
                customer_id=customer_id,
                phone_number=phone_number,
                full_name=full_name,
                pin_ciphertext=self._cipher.encrypt(pin, _pin_context(customer_id)),
                failed_pin_attempts=0,
            )
            try:
                async with self._sessions.begin() as session:
                    session.add(row)
            except IntegrityError:
                if await self.by_phone(phone_number) is not None:
                    raise PhoneAlreadyRegistered(phone_number) from None
                continue
            log.info("customer created", customer_id=customer_id)
            return _view(row)
        raise RuntimeError("could not allocate a customer ID")

    async def by_customer_id(self, customer_id: str) -> CustomerView | None:
        async with self._sessions() as session:
            row = await session.scalar(select(Customer).where(Customer.customer_id == customer_id))
            return _view(row) if row else None

    async def by_phone(self, phone_number: str) -> CustomerView | None:
        async with self._sessions() as session:
            row = await session.scalar(
                select(Customer).where(Customer.phone_number == phone_number)
            )
            return _view(row) if row else None

    async def login(self, customer_id: str, pin: str, phone: str | None = None) -> LoginResult:
        """Check a PIN typed on `phone`. Unknown IDs, wrong PINs and accounts locked
        against other phones all answer `wrong_pin` to a phone that is not the account's
        (nothing tells a stranger which IDs exist); the account's own phone learns its
        attempts left and its lock-out."""
        async with self._sessions() as session:
            row = await session.scalar(select(Customer).where(Customer.customer_id == customer_id))
        phone_key = f"phone:{phone}" if phone else None
        if phone_key and await self._locked_for(phone_key):
            return LoginResult(
                LoginOutcome.locked,
                locked_seconds=await self._locked_for(phone_key),
                phone_locked=True,
            )
        own = row is not None and phone == row.phone_number
        if row is None:
            if phone_key:
                await self._count(phone_key, self.phone_max_pin_attempts)
            return LoginResult(LoginOutcome.wrong_pin)
        account_key = f"{'own' if own else 'account'}:{customer_id}"
        locked = await self._locked_for(account_key)
        if row.locked_at is not None or locked:  # locked_at: a lock made before 0006
            if own or row.locked_at is not None:
                return LoginResult(LoginOutcome.locked, _view(row), locked_seconds=locked)
            if phone_key:
                await self._count(phone_key, self.phone_max_pin_attempts)
            return LoginResult(LoginOutcome.wrong_pin)
        if not self._cipher.matches(row.pin_ciphertext, pin, _pin_context(customer_id)):
            failures, locked = await self._count(account_key, self.max_pin_attempts)
            if phone_key and not own:
                await self._count(phone_key, self.phone_max_pin_attempts)
            if locked:
                log.warning("customer locked after wrong PINs", customer_id=customer_id, own=own)
            if not own:
                return LoginResult(LoginOutcome.wrong_pin)
            if locked:
                return LoginResult(LoginOutcome.locked, _view(row), locked_seconds=locked)
            return LoginResult(
                LoginOutcome.wrong_pin, attempts_left=max(self.max_pin_attempts - failures, 0)
            )
        async with self._sessions.begin() as session:
            await session.execute(
                update(Customer)
                .where(Customer.customer_id == customer_id)
                .values(failed_pin_attempts=0, last_login_at=utcnow())
            )
            keys = [account_key, *([phone_key] if phone_key else [])]
            await session.execute(
                update(PinLockout)
                .where(PinLockout.key.in_(keys))
                .values(failed_attempts=0, lockouts=0, locked_until=None)
            )
        return LoginResult(LoginOutcome.ok, _view(row), self.max_pin_attempts)

    async def _locked_for(self, key: str) -> int:
        """Seconds left of the key's lock-out (0: not locked)."""
        async with self._sessions() as session:
            until = await session.scalar(
                select(PinLockout.locked_until).where(PinLockout.key == key)
            )
        if until is None:
            return 0
        left = (until - utcnow()).total_seconds()
        return max(int(left + 0.999), 0) if left > 0 else 0

    async def _count(self, key: str, limit: int) -> tuple[int, int]:
        """One more wrong PIN under `key`: (failures now, seconds locked or 0). The count
        is one atomic UPDATE; reaching the limit starts the next, longer lock-out."""
        async with self._sessions.begin() as session:
            insert = dialect_of(session).insert
            await session.execute(
                insert(PinLockout)
                .values(key=key, failed_attempts=0, lockouts=0, updated_at=utcnow())
                .on_conflict_do_nothing(index_elements=["key"])
            )
            failures, lockouts = (
                await session.execute(
                    update(PinLockout)
                    .where(PinLockout.key == key)
                    .values(failed_attempts=PinLockout.failed_attempts + 1)
                    .returning(PinLockout.failed_attempts, PinLockout.lockouts)
                )
            ).one()
            if failures < limit:
                return failures, 0
            seconds = min(self._lockout * 2**lockouts, self._lockout_max)
            await session.execute(
                update(PinLockout)
                .where(PinLockout.key == key)
                .values(
                    failed_attempts=0,
                    lockouts=lockouts + 1,
                    locked_until=utcnow() + timedelta(seconds=seconds),
                )
            )
        return failures, int(seconds)

    async def lockouts(self) -> list[Lockout]:
        """Every lock-out in force now, soonest to end first."""
        async with self._sessions() as session:
            rows = await session.scalars(
                select(PinLockout)
                .where(PinLockout.locked_until > utcnow())
                .order_by(PinLockout.locked_until)
            )
            found = [Lockout(r.key, r.failed_attempts, r.lockouts, r.locked_until) for r in rows]
            legacy = await session.scalars(select(Customer).where(Customer.locked_at.is_not(None)))
            found += [Lockout(f"account:{c.customer_id}", 0, 1, None) for c in legacy]
        return found

    async def set_pin(self, customer_id: str, new_pin: str) -> None:
        """Replace the PIN; the caller has just checked the current one with `login`."""
        async with self._sessions.begin() as session:
            await session.execute(
                update(Customer)
                .where(Customer.customer_id == customer_id)
                .values(pin_ciphertext=self._cipher.encrypt(new_pin, _pin_context(customer_id)))
            )
        log.info("customer PIN changed", customer_id=customer_id)

    async def pin_matches(self, customer_id: str, pin: str) -> bool:
        """Compare without touching the lockout count (used to refuse reusing the same PIN)."""
        async with self._sessions() as session:
            ciphertext = await session.scalar(
                select(Customer.pin_ciphertext).where(Customer.customer_id == customer_id)
            )
        return ciphertext is not None and self._cipher.matches(
            ciphertext, pin, _pin_context(customer_id)
        )

    async def unlock(self, target: str) -> bool:
        """Lift the lock-outs of a customer ID (all its keys) or of a phone number (`+...`),
        forgetting their counts; True when something was changed."""
        keys = (
            [f"phone:{target}"]
            if target.startswith("+")
            else [f"account:{target}", f"own:{target}"]
        )
        async with self._sessions.begin() as session:
            lifted = await session.execute(
                delete(PinLockout).where(PinLockout.key.in_(keys)).returning(PinLockout.key)
            )
            changed = lifted.first() is not None
            if not target.startswith("+"):
                result = await session.execute(
                    update(Customer)
                    .where(Customer.customer_id == target, Customer.locked_at.is_not(None))
                    .values(failed_pin_attempts=0, locked_at=None)
                    .returning(Customer.id)
                )
                changed = result.first() is not None or changed
        if changed:
            log.info("lock-out lifted", target=target if not target.startswith("+") else "phone")
        return changed

    async def locks_of(self, customer: CustomerView) -> list[Lockout]:
        """The lock-outs in force that keep this customer out: the account's (against other
        phones), its own phone's account key, and its phone's (at any account)."""
        keys = [
            f"account:{customer.customer_id}",
            f"own:{customer.customer_id}",
            f"phone:{customer.phone_number}",
        ]
        async with self._sessions() as session:
            rows = await session.scalars(
                select(PinLockout)
                .where(PinLockout.key.in_(keys), PinLockout.locked_until > utcnow())
                .order_by(PinLockout.locked_until)
            )
            found = [Lockout(r.key, r.failed_attempts, r.lockouts, r.locked_until) for r in rows]
        if customer.locked:  # a lock made before 0006, lifted only by hand
            found.append(Lockout(f"account:{customer.customer_id}", 0, 1, None))
        return found

    async def unlock_customer(self, customer: CustomerView) -> bool:
        """Lift every lock-out keeping the customer out, the phone's included; True when
        something was changed."""
        account = await self.unlock(customer.customer_id)
        phone = await self.unlock(customer.phone_number)
        return account or phone
