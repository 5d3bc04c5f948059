"""One USSD request, start to finish: lock the session, load it, apply the new answers, save.

The rules of seed part B that concern sessions live here:
- requests of one session are serialised (per-session lock, shared through Redis);
- a gateway retry (same session, same `text`) gets the stored reply and changes nothing;
- a new session whose first text already carries answers (shortcut dial) is walked from
  the welcome menu through them;
- an expired session answers "dial again", an ended one likewise (except to a retry);
- nothing is saved unless the whole request succeeded, so a failure changes no state.
"""

from __future__ import annotations

import logging
import operator
import time
from collections.abc import Callable, Container
from hmac import compare_digest
from typing import Any

from twinhub.logging import get_logger, mask_phone
from twinhub.ussd.inputs import new_inputs
from twinhub.ussd.menu import Menu, Reply, State
from twinhub.ussd.request import CONTROL as _CONTROL
from twinhub.ussd.request import MAX_TEXT, UssdRequest
from twinhub.ussd.sessions import ACTIVE, ENDED, Session, SessionStore

log = get_logger(__name__)
PRE_MENU = State.pre_menu.value
# structlog builds a bound logger before its level filter drops an event: asking the
# standard logger first keeps an info line that is not written from costing anything.
_logs_info = logging.getLogger(__name__).isEnabledFor


class UssdEngine:
    def __init__(
        self,
        store: SessionStore,
        menu: Menu,
        digest: Callable[[str, str], str | int],
        clock: Callable[[], float] = time.time,
        on_session_started: Callable[[], object] = lambda: None,
    ) -> None:
        self.store = store
        # The texts' keyed digest: PinCipher.digest (an HMAC), or the memory store's own
        # (`process_digest`: its records never leave this process), compared as ints.
        local = getattr(store, "text_digest", None)
        self._digest: Callable[[str, str], str | int] = local or digest
        self._same: Callable[[Any, Any], bool] = operator.eq if local else compare_digest
        self._on_session_started = on_session_started
        self._menu = menu
        self._clock = clock
        # The in-memory store answers without awaiting (one coroutine fewer each way).
        self._load_now = getattr(store, "load_now", None)
        self._save_now = getattr(store, "save_now", None)
        # The sessions whose lock a request holds (the memory store's KeyedLocks).
        self._held: Container[str] = getattr(store, "held", ())

    async def handle(self, request: UssdRequest) -> tuple[str, str]:
        """The rendered reply, and an outcome label for metrics (con, end, retry, invalid)."""
        session_id, text = request.sessionId, request.text
        store = self.store
        load_now = self._load_now
        async with store.lock(session_id):
            session = load_now(session_id) if load_now else await store.load(session_id)
            now = self._clock()
            if session is None:
                session = Session(
                    session_id=session_id,
                    phone_number=request.phoneNumber,
                    service_code=request.serviceCode,
                    state=PRE_MENU,
                    created_at=now,
                    updated_at=now,
                )
                self._started(session)
                previous = None
            elif session.phone_number != request.phoneNumber:
                log.warning("ussd session reused by another phone", session_id=session_id)
                return _end(self._menu.content_for(session).closing.invalid_request), "invalid"
            elif session.is_expired(now, store.ttl):  # before replay: a stale menu misleads
                return _end(self._menu.content_for(session).closing.expired), "end"
            elif len(text) == session.last_text_length and self._is_last_text(session, text):
                return session.last_reply, "retry"
            elif session.status == ENDED:
                return _end(self._menu.content_for(session).closing.ended), "end"
            else:
                previous = self._previous(session, text)
            # Apply the new answers. The menu answers most steps without awaiting
            # (`start_now`, `answer_now`: None when it cannot, having changed nothing).
            menu = self._menu
            reply = None
            if previous is None:
                reply = menu.start_now(session) or await menu.start(session)
            for answer in new_inputs(previous, text):
                reply = menu.answer_now(session, answer) or await menu.answer(session, answer)
                if reply.end:
                    break
            reply, rendered = self._answered(session, reply, text, session_id)
            if self._save_now is not None:
                self._save_now(session)
            else:
                await store.save(session)
        if reply.end:
            if _logs_info(logging.INFO):
                log.info("ussd session ended", session_id=session_id, state=session.state)
            return rendered, "end"
        return rendered, "con"

    def _started(self, session: Session) -> None:
        """A new session: counted, and logged when info lines are written."""
        self._on_session_started()
        if _logs_info(logging.INFO):
            log.info(
                "ussd session started",
                session_id=session.session_id,
                phone=mask_phone(session.phone_number),
            )

    def _answered(
        self, session: Session, reply: Reply | None, text: str, session_id: str
    ) -> tuple[Reply, str]:
        """The step's reply (the current screen when no input was new) and its text, noted
        in the session as the last answered: a retry of the same text gets it again.
        Inactivity counts from the reply (the store times its record the same way; a new
        session waits on the database for its language before that)."""
        if reply is None:
            reply = Reply(False, session.message)
        rendered = reply.render()
        session.last_text_digest = self._digest(text, session_id)
        session.last_text_length = len(text)
        session.last_reply = rendered
        session.updated_at = self._clock()
        return reply, rendered

    def handle_now(self, request: UssdRequest) -> tuple[str, str] | None:
        """`handle` without awaiting, when the store is this process's memory and the menu
        answers every new input without awaiting (`start_now`, `answer_now`): the usual
        step. None when `handle` must be awaited, having changed nothing (no record saved,
        nothing counted or logged; what it read is read again). Nothing in it awaits, so no
        other request runs meanwhile: the session's lock is not taken, but a session whose
        lock another request holds (waiting on the database) is left to `handle`, which
        waits its turn. Expired, ended and reused sessions are left to `handle` too. Tested
        side by side with `handle` (tests/integration/registry/test_hot_paths.py)."""
        load_now = self._load_now
        session_id = request.sessionId
        if load_now is None or session_id in self._held:
            return None
        return self._step_now(
            session_id,
            request.phoneNumber,
            request.serviceCode,
            request.text,
            load_now(session_id),
        )

    def continue_now(self, fields: dict[str, Any]) -> tuple[str, str] | None:
        """`handle_now` of a form's fields not validated yet, for a session the memory
        store holds when the fields' phone number and service code are the session's own:
        those and its id passed UssdRequest's validation when the session began (records
        are made of validated requests alone, and keep both), so only the text is checked
        here, as UssdRequest checks it. None for any other request (then validated whole,
        and handled), having changed nothing. Tested against validation and `handle`."""
        load_now = self._load_now
        session_id, text = fields.get("sessionId"), fields.get("text")
        if (
            load_now is None
            or type(session_id) is not str
            or type(text) is not str
            or len(text) > MAX_TEXT
            or _CONTROL.search(text) is not None
            or session_id in self._held
        ):
            return None
        session = load_now(session_id)
        if (
            session is None
            or session.phone_number != fields.get("phoneNumber")
            or session.service_code != fields.get("serviceCode")
        ):
            return None
        return self._step_now(session_id, session.phone_number, session.service_code, text, session)

    def _step_now(
        self, session_id: str, phone: str, service_code: str, text: str, session: Session | None
    ) -> tuple[str, str] | None:
        """handle_now's step of a valid request, once the session is loaded (None: new)."""
        save_now = self._save_now
        if save_now is None:
            return None
        now = self._clock()
        menu = self._menu
        if session is None:
            session = Session(
                session_id=session_id,
                phone_number=phone,
                service_code=service_code,
                state=PRE_MENU,
                created_at=now,
                updated_at=now,
            )
            reply = menu.start_now(session)
            if reply is None:
                return None
            previous = None
        elif (
            session.phone_number != phone
            or (session.status == ACTIVE and now - session.updated_at > self.store.ttl)  # expired
            or session.last_text_digest is None  # never saved so by `handle`
        ):
            return None
        else:
            # `_is_last_text`, inline. A text of length 0 is "", whose digest the record
            # holds when its length is 0: the memory store's records are all written by
            # this process, under one key.
            length, stored, digest, same = (
                session.last_text_length,
                session.last_text_digest,
                self._digest,
                self._same,
            )
            if len(text) == length and (not length or same(digest(text, session_id), stored)):
                return session.last_reply, "retry"
            if session.status == ENDED:
                return None
            previous = text[:length]
            if len(previous) != length or (
                length and not same(digest(previous, session_id), stored)
            ):
                previous = "\x00"  # as `_previous`
            reply = None
        for answer in new_inputs(previous, text):
            reply = menu.answer_now(session, answer)
            if reply is None:
                return None
            if reply.end:
                break
        reply, rendered = self._answered(session, reply, text, session_id)
        save_now(session)
        if previous is None:
            self._started(session)
        if reply.end:
            if _logs_info(logging.INFO):
                log.info("ussd session ended", session_id=session_id, state=session.state)
            return rendered, "end"
        return rendered, "con"

    def _is_last_text(self, session: Session, text: str) -> bool:
        """True when `text` is the one the previous request carried (a gateway retry)."""
        return (
            session.last_text_digest is not None
            and len(text) == session.last_text_length
            and self._same(self._digest(text, session.session_id), session.last_text_digest)
        )

    def _previous(self, session: Session, text: str) -> str:
        """The previous request's text when `text` starts with it, else a text that is no
        prefix of anything (control characters never pass validation), so that only the
        newest answer is taken, as for a gateway that sends the latest input alone."""
        candidate = text[: session.last_text_length]
        if len(candidate) == session.last_text_length and self._is_last_text(session, candidate):
            return candidate
        return "\x00"

    async def debug_view(self, session_id: str) -> dict[str, object] | None:
        """The seed's session record, or None for a session unknown, ended or expired."""
        session = await self.store.load(session_id)
        if (
            session is None
            or session.status == ENDED
            or session.is_expired(self._clock(), self.store.ttl)
        ):
            return None
        return {
            "sessionId": session.session_id,
            "debugInfo": {
                "state": session.state,
                "context": {
                    "sessionId": session.session_id,
                    "phoneNumber": session.phone_number,
                    "serviceCode": session.service_code,
                    "message": session.message,
                    "isAuthenticated": session.is_authenticated,
                    "customerId": session.customer_id,
                },
                "status": session.status,
            },
            "activeSessions": await self.store.active_ids(),
        }


def _end(text: str) -> str:
    return Reply(True, text).render()
