"""Stove Status: is my stove on, when it cooked, and reporting a problem with it."""

from __future__ import annotations

from twinhub.services.stove_care import PROBLEM_KINDS, StoveCare, owned_stoves
from twinhub.services.stoves import StoveService, StoveView
from twinhub.ussd.flows.stoves import StoveFlow
from twinhub.ussd.inputs import BACK
from twinhub.ussd.navigation import Navigator
from twinhub.ussd.screens import Content, Notice
from twinhub.ussd.sessions import Session
from twinhub.ussd.states import (
    ONLY_STOVE,
    PAGE,
    PROBLEM,
    REFERENCE,
    STOVE,
    Handler,
    Renderer,
    Reply,
    State,
    customer_of,
    small_number,
)


class StatusFlow:
    """A stove's state, picked from the list when the customer has several, and a problem
    reported about it."""

    def __init__(
        self, nav: Navigator, stoves: StoveService, care: StoveCare, lists: StoveFlow
    ) -> None:
        self._nav = nav
        self._stoves = stoves
        self._care = care
        self._lists = lists  # the paged stove list, shared with My Stoves

    def handlers(self) -> dict[State, Handler]:
        return {
            State.stove_pick: self._stove_pick,
            State.stove_status: self._stove_status,
            State.problem_kind: self._problem_kind,
            State.problem_confirm: self._problem_confirm,
            State.problem_sent: self._nav.info,
        }

    def renderers(self) -> dict[State, Renderer]:
        return {
            State.stove_pick: self._pick_screen,
            State.stove_status: self._status_screen,
            State.problem_kind: self._kinds_screen,
            State.problem_confirm: self._confirm_screen,
            State.problem_sent: self._sent_screen,
        }

    async def open(self, session: Session) -> Reply:
        """Straight to the stove of a customer who has one; a list to pick from otherwise."""
        session.scratch[PAGE] = "0"
        stoves = await owned_stoves(self._stoves, customer_of(session))
        if len(stoves) == 1:
            session.scratch[STOVE] = stoves[0].did
            session.scratch[ONLY_STOVE] = "1"
            return await self._nav.show(session, State.stove_status)
        return await self._nav.show(session, State.stove_pick)

    async def _my_stove(self, session: Session) -> StoveView | None:
        """The stove chosen for Stove Status, if the customer still owns it."""
        did = session.scratch.get(STOVE)
        stoves = await owned_stoves(self._stoves, customer_of(session)) if did else []
        return next((stove for stove in stoves if stove.did == did), None)

    async def _pick_screen(self, session: Session, content: Content) -> str:
        stoves, page, pages = await self._lists.stove_page(session)
        if not stoves:
            return content.status.no_stove_status
        return content.status.stove_pick(stoves, page, pages)

    async def _status_screen(self, session: Session, content: Content) -> str:
        stove = await self._my_stove(session)
        if stove is None:
            return content.stoves.stove_gone
        return content.status.stove_status(stove, await self._care.health(stove.did))

    async def _kinds_screen(self, session: Session, content: Content) -> str:
        return content.status.problem_kinds

    async def _confirm_screen(self, session: Session, content: Content) -> str:
        stove = await self._my_stove(session)
        if stove is None:
            return content.stoves.stove_gone
        return content.status.problem_confirm(stove, session.scratch[PROBLEM])

    async def _sent_screen(self, session: Session, content: Content) -> str:
        return content.status.problem_sent(session.scratch.get(REFERENCE, ""))

    async def _stove_pick(self, session: Session, answer: str) -> Reply:
        return await self._lists.page_stoves(session, answer, State.stove_pick, State.stove_status)

    async def _stove_status(self, session: Session, answer: str) -> Reply:
        if answer == BACK:
            if session.scratch.get(ONLY_STOVE):
                return await self._nav.show(session, State.main_menu)
            return await self._nav.show(session, State.stove_pick)
        if answer == "1" and await self._my_stove(session) is not None:
            return await self._nav.show(session, State.problem_kind)
        return await self._nav.show(session, State.stove_status, Notice.invalid_choice)

    async def _problem_kind(self, session: Session, answer: str) -> Reply:
        number = small_number(answer)
        if number is None or not 1 <= number <= len(PROBLEM_KINDS):
            return await self._nav.show(session, State.problem_kind, Notice.invalid_choice)
        session.scratch[PROBLEM] = PROBLEM_KINDS[number - 1]
        return await self._nav.show(session, State.problem_confirm)

    async def _problem_confirm(self, session: Session, answer: str) -> Reply:
        stove = await self._my_stove(session)
        if answer != "1" or stove is None:
            return await self._nav.show(session, State.problem_confirm, Notice.invalid_choice)
        problem = await self._care.report_problem(
            customer_of(session), stove.did, session.scratch.pop(PROBLEM)
        )
        session.scratch[REFERENCE] = problem.reference
        return await self._nav.show(session, State.problem_sent)
