"""The USSD context's start: the households' accounts and their PIN lock-outs, built from
UssdSettings (the gateway app itself is built per process by `ussd.app`)."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.security.pins import PinCipher
from twinhub.services.customers import CustomerService
from twinhub.settings import UssdSettings


def build_customers(
    sessions: async_sessionmaker[AsyncSession], settings: UssdSettings, cipher: PinCipher
) -> CustomerService:
    return CustomerService(
        sessions,
        cipher,
        settings.max_pin_attempts,
        phone_max_pin_attempts=settings.phone_max_pin_attempts,
        lockout_seconds=settings.lockout_seconds,
        lockout_max_seconds=settings.lockout_max_seconds,
    )
