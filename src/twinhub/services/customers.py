"""Customer accounts: creation, PIN login with lockout, PIN change, unlock.

Lockout counts are changed by single atomic UPDATE statements, so parallel guesses from many
sessions cannot slip past the limit.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from sqlalchemy import case, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.db.models import Customer, utcnow
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
    outcome: LoginOutcome
    customer: CustomerView | None = None
    attempts_left: int = 0


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
    ) -> None:
        self._sessions = sessions
        self._cipher = cipher
        self.max_pin_attempts = max_pin_attempts

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

    async def login(self, customer_id: str, pin: str) -> LoginResult:
        """Check a PIN; a wrong one counts toward the lockout, a right one resets the count."""
        async with self._sessions() as session:
            row = await session.scalar(select(Customer).where(Customer.customer_id == customer_id))
        if row is None:
            return LoginResult(LoginOutcome.unknown)
        if row.locked_at is not None:
            return LoginResult(LoginOutcome.locked, _view(row))
        if not self._cipher.matches(row.pin_ciphertext, pin, _pin_context(customer_id)):
            return await self._count_failure(customer_id)
        async with self._sessions.begin() as session:
            reset = await session.execute(
                update(Customer)
                .where(Customer.customer_id == customer_id, Customer.locked_at.is_(None))
                .values(failed_pin_attempts=0, last_login_at=utcnow())
                .returning(Customer.id)
            )
            if reset.first() is None:  # locked by a parallel wrong guess meanwhile
                return LoginResult(LoginOutcome.locked, _view(row))
        return LoginResult(LoginOutcome.ok, _view(row), self.max_pin_attempts)

    async def _count_failure(self, customer_id: str) -> LoginResult:
        attempts = Customer.failed_pin_attempts + 1
        async with self._sessions.begin() as session:
            result = await session.execute(
                update(Customer)
                .where(Customer.customer_id == customer_id)
                .values(
                    failed_pin_attempts=attempts,
                    locked_at=case(
                        (attempts >= self.max_pin_attempts, utcnow()), else_=Customer.locked_at
                    ),
                )
                .returning(Customer.failed_pin_attempts)
            )
            failures = result.scalar_one()
        left = max(self.max_pin_attempts - failures, 0)
        if left == 0:
            log.warning("customer locked after wrong PINs", customer_id=customer_id)
            return LoginResult(LoginOutcome.locked)
        return LoginResult(LoginOutcome.wrong_pin, attempts_left=left)

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

    async def unlock(self, customer_id: str) -> bool:
        """Operator action after identity checks; True when an account was changed."""
        async with self._sessions.begin() as session:
            result = await session.execute(
                update(Customer)
                .where(Customer.customer_id == customer_id)
                .values(failed_pin_attempts=0, locked_at=None)
                .returning(Customer.id)
            )
            changed = result.first() is not None
        if changed:
            log.info("customer unlocked", customer_id=customer_id)
        return changed
