"""A household survey over USSD: a household whose stove a drawn survey sampled is asked
its questions when it dials in, before the welcome menu, with no PIN (the network's phone
number is the household's, as for "Use this phone's account"; nothing here shows account
data). Each answer is stored as it is typed, with the session as evidence (services.
surveys); "0" leaves for the welcome menu and the next dial asks what is left.
"""

from __future__ import annotations

from twinhub.kernel.errors import Invalid, NotFound
from twinhub.services.surveys import (
    IN_USE,
    NO,
    OTHER_FUEL,
    OTHER_FUELS,
    PEOPLE,
    YES,
    Question,
    SurveyService,
)
from twinhub.ussd.navigation import Navigator
from twinhub.ussd.screens import Content, Notice, NoticeText
from twinhub.ussd.sessions import Session
from twinhub.ussd.states import (
    PRE_MENU,
    SURVEY,
    SURVEY_NAME,
    SURVEY_RANGE,
    SURVEY_STOVE,
    Handler,
    Renderer,
    Reply,
    State,
    small_number,
)

STATE_OF_QUESTION = {
    PEOPLE: State.survey_people,
    IN_USE: State.survey_in_use,
    OTHER_FUEL: State.survey_fuel,
}
QUESTION_OF_STATE = {state: question for question, state in STATE_OF_QUESTION.items()}
YES_NO = {"1": YES, "2": NO}


class SurveyFlow:
    """The survey's questions, one screen each, and the thanks."""

    def __init__(self, nav: Navigator, surveys: SurveyService) -> None:
        self._nav = nav
        self._surveys = surveys

    def handlers(self) -> dict[State, Handler]:
        return {
            State.survey_people: self._people,
            State.survey_in_use: self._in_use,
            State.survey_fuel: self._fuel,
            State.survey_done: self._nav.info,
        }

    def renderers(self) -> dict[State, Renderer]:
        return {
            State.survey_people: self._people_screen,
            State.survey_in_use: self._in_use_screen,
            State.survey_fuel: self._fuel_screen,
        }

    async def ask(
        self, session: Session, question: Question, notice: NoticeText | None = None
    ) -> Reply:
        """Show `question`, remembering which survey and stove it is about."""
        session.scratch.update(
            {
                SURVEY: question.survey_id,
                SURVEY_STOVE: question.stove,
                SURVEY_NAME: question.stove_name,
                SURVEY_RANGE: f"{question.low}-{question.high}",
            }
        )
        return await self._nav.show(session, STATE_OF_QUESTION[question.question], notice)

    def _question(self, session: Session, state: State) -> Question:
        low, _, high = session.scratch.get(SURVEY_RANGE, "1-1").partition("-")
        return Question(
            session.scratch.get(SURVEY, ""),
            session.scratch.get(SURVEY_STOVE, ""),
            session.scratch.get(SURVEY_NAME, ""),
            QUESTION_OF_STATE[state],
            int(low),
            int(high),
        )

    async def _people_screen(self, session: Session, content: Content) -> str:
        question = self._question(session, State.survey_people)
        return content.survey.people(question.stove_name, question.low, question.high)

    async def _in_use_screen(self, session: Session, content: Content) -> str:
        return content.survey.in_use(session.scratch.get(SURVEY_NAME, ""))

    async def _fuel_screen(self, session: Session, content: Content) -> str:
        return content.survey.other_fuel(session.scratch.get(SURVEY_NAME, ""))

    async def _people(self, session: Session, answer: str) -> Reply:
        question = self._question(session, State.survey_people)
        if not (answer.isascii() and answer.isdigit()):
            return await self._nav.show(session, State.survey_people, Notice.quantity_digits)
        number = small_number(answer)
        if number is None or not question.low <= number <= question.high:
            notice = Notice.out_of_range(question.low, question.high)
            return await self._nav.show(session, State.survey_people, notice)
        return await self._store(session, question, str(number))

    async def _in_use(self, session: Session, answer: str) -> Reply:
        value = YES_NO.get(answer)
        if value is None:
            return await self._nav.show(session, State.survey_in_use, Notice.invalid_choice)
        return await self._store(session, self._question(session, State.survey_in_use), value)

    async def _fuel(self, session: Session, answer: str) -> Reply:
        number = small_number(answer)
        if number is None or not 1 <= number <= len(OTHER_FUELS):
            return await self._nav.show(session, State.survey_fuel, Notice.invalid_choice)
        question = self._question(session, State.survey_fuel)
        return await self._store(session, question, OTHER_FUELS[number - 1])

    async def _store(self, session: Session, question: Question, value: str) -> Reply:
        """Store the answer with this session as its evidence; then the next question,
        or the thanks when the household has answered every one."""
        try:
            following = await self._surveys.answer(
                question, value, session.phone_number, session.session_id, session.language
            )
        except NotFound:  # no longer this phone's household's, or the survey is gone
            return await self._nav.show(session, PRE_MENU, Notice.invalid_choice)
        except Invalid:  # the screens check the range first; a range changed meanwhile
            here = STATE_OF_QUESTION[question.question]
            return await self._nav.show(session, here, Notice.invalid_choice)
        if following is None:
            session.scratch.clear()
            return await self._nav.show(session, State.survey_done)
        return await self.ask(session, following)
