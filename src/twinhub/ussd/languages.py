"""The menu language each phone and each customer chose, kept in `ussd_languages`.

Read once when a session starts (the phone's) and once at log-in (the customer's); the
session record carries the language after that, so other requests never ask the database.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.db.models import UssdLanguage, utcnow


def phone_key(phone_number: str) -> str:
    return f"phone:{phone_number}"


def customer_key(customer_id: str) -> str:
    return f"customer:{customer_id}"


class LanguageMemory:
    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    async def recalled(self, key: str) -> str | None:
        """The code stored under `key` as stored (the caller checks it is still served)."""
        async with self._sessions() as session:
            return await session.scalar(
                select(UssdLanguage.language).where(UssdLanguage.key == key)
            )

    async def remember(self, language: str, *keys: str) -> None:
        """Store `language` under every key, in one transaction (an upsert each)."""
        async with self._sessions.begin() as session:
            dialect = session.bind.dialect.name if session.bind else "sqlite"
            insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
            for key in keys:
                statement = insert(UssdLanguage).values(
                    key=key, language=language, updated_at=utcnow()
                )
                await session.execute(
                    statement.on_conflict_do_update(
                        index_elements=["key"],
                        set_={"language": language, "updated_at": utcnow()},
                    )
                )
