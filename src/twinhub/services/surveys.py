"""Household surveys: a programme asks a reproducible sample of its households, over USSD,
the questions its methodology needs, and the answers fix its sampled parameters.

Rules that live here (the statistics are mrv/sampling.py's):
- a survey belongs to a Project; creating and drawing one needs the proponent role or
  admin (a survey is the programme's configuration, no signed step of the workflow, so
  the admin may run it too); reading surveys needs any role that reads the registry;
- its sampling frame is every active stove of the project that a household owns (the
  stove's `ownerCustomerId`): one unit per stove, so a household with two stoves answers
  for each; the frame's size and digest are recorded with the sample;
- a survey is drawn once: one conditional UPDATE (created -> drawn) under which the sample
  is written, so a second draw, even at the same instant, is refused and stores nothing;
- each answer is stored when it is typed, once per household and question, with the USSD
  session, phone and language that gave it (the evidence); a household that hangs up is
  asked the next unanswered question when it dials again; answers outside their range are
  refused (Invalid, with the question as the field) and stored nowhere;
- the household size recorded at enrolment (the stove's `householdSize` when the sample
  was drawn) is kept beside the answer; the answer then becomes the stove's recorded size
  in a ledger write (a new version of the stove, `domain.update`, naming the survey, the
  USSD session and the size it replaced; the enrolment value stays in the stove's
  history), with `householdSizeConfirmation` saying which answer confirmed it: a period
  reports each stove's size as confirmed or as enrolled (unconfirmed);
- the sampled parameters a period computation reads come from `sampled_parameters`.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from twinhub.db.models import Customer, Domain, Relationship, Survey, SurveyAnswer, SurveyHousehold
from twinhub.kernel.clock import utcnow
from twinhub.kernel.errors import Conflict, FieldProblem, Forbidden, Invalid, NotFound
from twinhub.kernel.principals import Principal
from twinhub.logging import mask_phone
from twinhub.mrv.rollups import HOUSEHOLD_CONFIRMATION, household_record
from twinhub.mrv.rules import ACTIVE
from twinhub.mrv.sampling import (
    ROLES,
    Estimate,
    draw,
    estimate,
    estimate_share,
    frame_digest,
    planned_size,
)
from twinhub.services.domains import DomainService
from twinhub.services.ledger import Ledger
from twinhub.services.stoves import stove_name
from twinhub.services.twin_classes import same_kind

CREATED, DRAWN = "created", "drawn"
PEOPLE, IN_USE, OTHER_FUEL = "people", "inUse", "otherFuel"
QUESTIONS = (PEOPLE, IN_USE, OTHER_FUEL)  # in the order they are asked
YES, NO = "yes", "no"
NO_OTHER_FUEL = "none"
OTHER_FUELS = (NO_OTHER_FUEL, "charcoal", "wood", "kerosene", "lpg", "other")
# The sampled parameters, each the mean of one question's answers (a share: of 0/1).
HOUSEHOLD_SIZE, STOVE_USE, FUEL_STACKING = "householdSize", "stoveUse", "fuelStacking"
PARAMETER_UNITS = {HOUSEHOLD_SIZE: "persons", STOVE_USE: "fraction", FUEL_STACKING: "fraction"}
READERS = ("reader", "writer", "proponent", "verifier")
SEED_MAX = 64


@dataclass(frozen=True, slots=True)
class SurveyRules:
    """The defaults and limits a survey is made under (USSD_SURVEY_* settings)."""

    confidence: float = 0.9
    precision: float = 0.1
    expected_cv: float = 0.5
    household_min: int = 1
    household_max: int = 30
    max_sample: int = 5000
    refresh_seconds: float = 30.0


@dataclass(frozen=True, slots=True)
class Question:
    """The next question a sampled household is asked: which survey, stove and question,
    and for the household size the range an answer must fall in."""

    survey_id: str
    stove: str
    stove_name: str
    question: str
    low: int
    high: int


@dataclass(frozen=True, slots=True)
class AnswerView:
    question: str
    value: str
    session_id: str
    phone: str  # masked: the evidence names the session, not the whole number
    language: str
    answered_at: datetime

    def as_json(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "value": self.value,
            "sessionId": self.session_id,
            "phone": self.phone,
            "language": self.language,
            "answeredAt": self.answered_at.isoformat(),
        }


@dataclass(frozen=True, slots=True)
class HouseholdView:
    position: int
    stove: str
    customer_id: str
    recorded_size: int | None  # the stove's householdSize when drawn (enrolment)
    completed_at: datetime | None
    answers: dict[str, AnswerView] = field(default_factory=dict)

    @property
    def answered_size(self) -> int | None:
        answer = self.answers.get(PEOPLE)
        return int(answer.value) if answer else None

    @property
    def confirmed(self) -> bool | None:
        """Whether the answer confirms the recorded size; None until both are known."""
        if self.answered_size is None or self.recorded_size is None:
            return None
        return self.answered_size == self.recorded_size

    def as_json(self) -> dict[str, Any]:
        return {
            "position": self.position,
            "stove": self.stove,
            "customerId": self.customer_id,
            "householdSize": {
                "recorded": self.recorded_size,
                "answered": self.answered_size,
                "confirmed": self.confirmed,
            },
            "completedAt": self.completed_at.isoformat() if self.completed_at else None,
            "answers": [self.answers[q].as_json() for q in QUESTIONS if q in self.answers],
        }


@dataclass(frozen=True, slots=True)
class SurveyView:
    id: str
    project: str
    seed: str
    confidence: float
    target_precision: float
    expected_cv: float
    planned_size: int | None
    household_min: int
    household_max: int
    status: str
    frame_size: int | None
    frame_digest: str | None
    sample_size: int | None
    created_by: str
    created_at: datetime
    drawn_by: str | None
    drawn_at: datetime | None

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "project": self.project,
            "seed": self.seed,
            "confidence": self.confidence,
            "targetPrecision": self.target_precision,
            "expectedCv": self.expected_cv,
            "plannedSize": self.planned_size,
            "householdSize": {"min": self.household_min, "max": self.household_max},
            "status": self.status,
            "frameSize": self.frame_size,
            "frameDigest": self.frame_digest,
            "sampleSize": self.sample_size,
            "createdBy": self.created_by,
            "createdAt": self.created_at.isoformat(),
            "drawnBy": self.drawn_by,
            "drawnAt": self.drawn_at.isoformat() if self.drawn_at else None,
        }


def _survey_view(row: Survey) -> SurveyView:
    return SurveyView(
        row.id,
        row.project_did,
        row.seed,
        row.confidence,
        row.target_precision,
        row.expected_cv,
        row.planned_size,
        row.household_min,
        row.household_max,
        row.status,
        row.frame_size,
        row.frame_digest,
        row.sample_size,
        row.created_by,
        row.created_at,
        row.drawn_by,
        row.drawn_at,
    )


def _answer_view(row: SurveyAnswer) -> AnswerView:
    return AnswerView(
        row.question,
        row.value,
        row.session_id,
        mask_phone(row.phone_number),
        row.language,
        row.answered_at,
    )


def answer_problem(question: str, value: str, low: int, high: int) -> str | None:
    """Why `value` is no answer to `question`, or None. Household size: a whole number
    from `low` to `high`; in use: yes or no; other fuel: one of OTHER_FUELS."""
    if question == PEOPLE:
        if not (value.isascii() and value.isdigit() and len(value) <= 6):
            return "expected a whole number"
        if not low <= int(value) <= high:
            return f"expected {low} to {high}"
        return None
    if question == IN_USE:
        return None if value in (YES, NO) else "expected yes or no"
    if question == OTHER_FUEL:
        return None if value in OTHER_FUELS else f"expected one of {', '.join(OTHER_FUELS)}"
    return f"unknown question; expected one of {', '.join(QUESTIONS)}"


def survey_estimates(
    survey: SurveyView, households: Sequence[HouseholdView]
) -> dict[str, Estimate]:
    """Each sampled parameter's estimate from the answers so far (a parameter nobody has
    answered yet is absent): household size a mean, stove use and fuel stacking shares."""
    population = survey.frame_size or len(households)

    def given(question: str) -> list[str]:
        return [h.answers[question].value for h in households if question in h.answers]

    found = {
        HOUSEHOLD_SIZE: estimate([float(v) for v in given(PEOPLE)], survey.confidence, population),
        STOVE_USE: estimate_share([v == YES for v in given(IN_USE)], survey.confidence, population),
        FUEL_STACKING: estimate_share(
            [v != NO_OTHER_FUEL for v in given(OTHER_FUEL)], survey.confidence, population
        ),
    }
    return {name: result for name, result in found.items() if result is not None}


def parameter(survey: SurveyView, result: Estimate) -> dict[str, Any]:
    """A sampled parameter in the shape the methodology reads (design: sampled
    parameters): value, sample size, confidence, achieved precision, survey and seed."""
    return {
        "value": round(result.value, 6),
        "sampleSize": result.sample_size,
        "confidence": result.confidence,
        "precision": None if result.precision is None else round(result.precision, 6),
        "surveyId": survey.id,
        "seed": survey.seed,
    }


class SurveyService:
    """Surveys: made and drawn by a programme, answered by households over USSD."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        rules: SurveyRules,
        clock: Callable[[], float] = time.monotonic,
        ledger: Ledger | None = None,
        domains: DomainService | None = None,
    ) -> None:
        self._sessions = sessions
        self.rules = rules
        self._clock = clock
        # Where a confirmed household size is written (None: answers are stored only).
        self._ledger, self._domains = ledger, domains
        # The phones of households a drawn survey still asks, read at most every
        # refresh_seconds: a new USSD session is answered without the database when its
        # phone is surely not asked (the hot path), and asks the database otherwise.
        self._asking: frozenset[str] | None = None
        self._asked_at = 0.0

    # -- a programme's side ---------------------------------------------------------------
    async def create(self, caller: Principal, project: str, **given: Any) -> SurveyView:
        """A new survey of `project`, not drawn yet. `given` may set confidence, precision,
        expectedCv, sampleSize, householdMin, householdMax and seed; the rest default."""
        _may_survey(caller)
        rules = self.rules
        settings = {
            "confidence": given.get("confidence", rules.confidence),
            "precision": given.get("precision", rules.precision),
            "expectedCv": given.get("expectedCv", rules.expected_cv),
            "sampleSize": given.get("sampleSize"),
            "householdMin": given.get("householdMin", rules.household_min),
            "householdMax": given.get("householdMax", rules.household_max),
            "seed": given.get("seed") or secrets.token_hex(16),
        }
        self._check(settings)
        async with self._sessions() as session, session.begin():
            domain = await session.get(Domain, project)
            if domain is None:
                raise NotFound(f"No domain {project}.")
            if not same_kind(domain.type, "Project"):
                raise Invalid(
                    f"{project} is a {domain.type}; a survey samples a project's households.",
                    [FieldProblem("project", "expected a Project domain")],
                )
            row = Survey(
                id="sv_" + secrets.token_hex(8),
                project_did=project,
                seed=settings["seed"],
                confidence=settings["confidence"],
                target_precision=settings["precision"],
                expected_cv=settings["expectedCv"],
                planned_size=settings["sampleSize"],
                household_min=settings["householdMin"],
                household_max=settings["householdMax"],
                status=CREATED,
                created_by=caller.did,
                created_at=utcnow(),
            )
            session.add(row)
        return _survey_view(row)

    def _check(self, given: dict[str, Any]) -> None:
        """Every out-of-range setting, each with its field."""
        problems = []
        for name in ("confidence", "precision"):
            value = given[name]
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
                problems.append(FieldProblem(name, "expected a number between 0 and 1"))
        cv = given["expectedCv"]
        if isinstance(cv, bool) or not isinstance(cv, int | float) or not 0 < cv <= 10:
            problems.append(FieldProblem("expectedCv", "expected a number above 0, at most 10"))
        size = given["sampleSize"]
        limit = self.rules.max_sample
        if size is not None and (
            isinstance(size, bool) or not isinstance(size, int) or not 2 <= size <= limit
        ):
            problems.append(FieldProblem("sampleSize", f"expected a whole number 2 to {limit}"))
        low, high = given["householdMin"], given["householdMax"]
        for name, value in (("householdMin", low), ("householdMax", high)):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 999:
                problems.append(FieldProblem(name, "expected a whole number 1 to 999"))
        if not problems and low > high:
            problems.append(FieldProblem("householdMax", "expected at least householdMin"))
        seed = given["seed"]
        if not isinstance(seed, str) or not 1 <= len(seed) <= SEED_MAX or not seed.isprintable():
            problems.append(FieldProblem("seed", f"expected 1 to {SEED_MAX} printable characters"))
        if problems:
            raise Invalid("The survey's settings are out of range.", problems)

    async def draw(self, caller: Principal, survey_id: str) -> SurveyView:
        """Draw the survey's sample from its project's frame, once. Conflict when it was
        drawn already (nothing written); Invalid when no household owns a stove there."""
        _may_survey(caller)
        async with self._sessions() as session, session.begin():
            # The conditional UPDATE first: of two draws at once only one changes the row
            # (and on SQLite no read comes before the write it would have to upgrade).
            changed = await session.execute(
                update(Survey)
                .where(Survey.id == survey_id, Survey.status == CREATED)
                .values(status=DRAWN, drawn_by=caller.did, drawn_at=utcnow())
                .execution_options(synchronize_session=False)
            )
            row = await session.get(Survey, survey_id, populate_existing=True)
            if row is None:
                raise NotFound(f"No survey {survey_id}.")
            if not changed.rowcount:  # type: ignore[attr-defined]
                when = f" on {row.drawn_at.isoformat()}" if row.drawn_at else ""
                raise Conflict(
                    f"Survey {survey_id} was drawn already{when}: a sample is drawn once."
                )
            frame = await _frame(session, row.project_did)
            if not frame:  # raised inside the transaction: the survey stays undrawn
                raise Invalid(
                    f"No household owns an active stove of {row.project_did}: nothing to draw.",
                    [FieldProblem("project", "no stove with an ownerCustomerId")],
                )
            size = row.planned_size or planned_size(
                len(frame), row.confidence, row.target_precision, row.expected_cv
            )
            sample = draw(frame, min(size, self.rules.max_sample), row.seed)
            row.frame_size, row.frame_digest = len(frame), frame_digest(frame)
            row.sample_size = len(sample)
            for position, stove in enumerate(sample, start=1):
                owner, recorded = frame[stove]
                session.add(
                    SurveyHousehold(
                        survey_id=survey_id,
                        position=position,
                        stove_did=stove,
                        customer_id=owner,
                        recorded_household_size=recorded,
                    )
                )
        self._asking = None  # its households are asked from the next session on
        return await self.survey(survey_id)

    async def survey(self, survey_id: str) -> SurveyView:
        async with self._sessions() as session:
            row = await session.get(Survey, survey_id, populate_existing=True)
        if row is None:
            raise NotFound(f"No survey {survey_id}.")
        return _survey_view(row)

    async def surveys(self, project: str | None = None, limit: int = 100) -> list[SurveyView]:
        """Surveys, newest first; only `project`'s when given."""
        query = select(Survey).order_by(Survey.created_at.desc(), Survey.id).limit(limit)
        if project is not None:
            query = query.where(Survey.project_did == project)
        async with self._sessions() as session:
            return [_survey_view(row) for row in await session.scalars(query)]

    async def households(self, survey_id: str) -> list[HouseholdView]:
        """The sample in draw order, each household with its answers so far."""
        async with self._sessions() as session:
            rows = list(
                await session.scalars(
                    select(SurveyHousehold)
                    .where(SurveyHousehold.survey_id == survey_id)
                    .order_by(SurveyHousehold.position)
                )
            )
            answers = list(
                await session.scalars(
                    select(SurveyAnswer)
                    .where(SurveyAnswer.survey_id == survey_id)
                    .order_by(SurveyAnswer.id)
                )
            )
        by_stove: dict[str, dict[str, AnswerView]] = {}
        for answer in answers:
            by_stove.setdefault(answer.stove_did, {})[answer.question] = _answer_view(answer)
        return [
            HouseholdView(
                row.position,
                row.stove_did,
                row.customer_id,
                row.recorded_household_size,
                row.completed_at,
                by_stove.get(row.stove_did, {}),
            )
            for row in rows
        ]

    async def results(self, survey_id: str) -> dict[str, Any]:
        """What the survey fixes so far: each parameter with its achieved precision against
        the target, and how many households answered."""
        survey = await self.survey(survey_id)
        households = await self.households(survey_id)
        estimates = survey_estimates(survey, households)
        return {
            "survey": survey.as_json(),
            "householdSizes": await self.household_confirmations(survey.project),
            "answered": sum(1 for h in households if h.answers),
            "completed": sum(1 for h in households if h.completed_at is not None),
            "confirmedHouseholdSizes": sum(1 for h in households if h.confirmed),
            "parameters": {
                name: {
                    **parameter(survey, result),
                    "unit": PARAMETER_UNITS[name],
                    "role": ROLES[name],  # a formula's parameter, or a monitoring check
                    "targetPrecision": survey.target_precision,
                    "meetsTarget": result.meets(survey.target_precision),
                }
                for name, result in estimates.items()
            },
        }

    async def sampled_parameters(self, project: str) -> dict[str, dict[str, Any]]:
        """The project's sampled parameters for a period computation, in the design's
        shape: each from the newest drawn survey whose answers give it a precision (two
        answers or more). A parameter no survey fixes yet is absent."""
        found: dict[str, dict[str, Any]] = {}
        drawn = [s for s in await self.surveys(project) if s.status == DRAWN]
        for survey in sorted(drawn, key=lambda s: s.drawn_at or s.created_at, reverse=True):
            estimates = survey_estimates(survey, await self.households(survey.id))
            for name, result in estimates.items():
                if name not in found and result.precision is not None:
                    found[name] = parameter(survey, result)
            if len(found) == len(PARAMETER_UNITS):
                break
        return found

    async def household_sizes(self, project: str) -> dict[str, dict[str, Any]]:
        """Each surveyed stove's household size: recorded at enrolment and answered, and
        whether the answer confirms it (the newest survey's answer counts)."""
        sizes: dict[str, dict[str, Any]] = {}
        drawn = [s for s in await self.surveys(project) if s.status == DRAWN]
        for survey in sorted(drawn, key=lambda s: s.drawn_at or s.created_at, reverse=True):
            for household in await self.households(survey.id):
                if household.answered_size is None or household.stove in sizes:
                    continue
                sizes[household.stove] = {
                    "recorded": household.recorded_size,
                    "answered": household.answered_size,
                    "confirmed": household.confirmed,
                    "surveyId": survey.id,
                    "sessionId": household.answers[PEOPLE].session_id,
                }
        return sizes

    # -- a household's side (USSD) --------------------------------------------------------
    def surely_not_asked(self, phone: str) -> bool:
        """True when this process knows, without the database, that no survey asks this
        phone (read at most refresh_seconds ago); False when it may be asked."""
        asking = self._asking
        if asking is None or self._clock() - self._asked_at > self.rules.refresh_seconds:
            return False
        return phone not in asking

    async def question_for(self, phone: str) -> Question | None:
        """The next question a drawn survey asks the household of `phone`, or None."""
        if self._asking is None or self._clock() - self._asked_at > self.rules.refresh_seconds:
            await self._refresh()
        if self._asking is not None and phone not in self._asking:
            return None
        async with self._sessions() as session:
            found = (
                await session.execute(
                    select(SurveyHousehold, Survey)
                    .join(Survey, Survey.id == SurveyHousehold.survey_id)
                    .join(Customer, Customer.customer_id == SurveyHousehold.customer_id)
                    .where(
                        Customer.phone_number == phone,
                        SurveyHousehold.completed_at.is_(None),
                        Survey.status == DRAWN,
                    )
                    .order_by(Survey.drawn_at, SurveyHousehold.position)
                    .limit(1)
                )
            ).first()
            if found is None:
                return None
            household, survey = found
            return await _next_question(session, survey, household.stove_did)

    async def _refresh(self) -> None:
        read_at = self._clock()
        async with self._sessions() as session:
            phones = await session.scalars(
                select(Customer.phone_number)
                .join(SurveyHousehold, SurveyHousehold.customer_id == Customer.customer_id)
                .join(Survey, Survey.id == SurveyHousehold.survey_id)
                .where(SurveyHousehold.completed_at.is_(None), Survey.status == DRAWN)
                .distinct()
            )
            self._asking = frozenset(phones)
        self._asked_at = read_at

    async def answer(
        self,
        question: Question,
        value: str,
        phone: str,
        session_id: str,
        language: str,
    ) -> Question | None:
        """Store the household's answer to `question` (from the phone of the household the
        sample drew), and return the next question, or None when its stove is done. An
        answer out of range is Invalid (the question is the field) and stored nowhere; an
        answer given already (another session) stays as it was."""
        problem = answer_problem(question.question, value, question.low, question.high)
        if problem is not None:
            raise Invalid("The answer is out of range.", [FieldProblem(question.question, problem)])
        async with self._sessions() as session:
            async with session.begin():
                found = (
                    await session.execute(
                        select(SurveyHousehold, Survey)
                        .join(Survey, Survey.id == SurveyHousehold.survey_id)
                        .join(Customer, Customer.customer_id == SurveyHousehold.customer_id)
                        .where(
                            SurveyHousehold.survey_id == question.survey_id,
                            SurveyHousehold.stove_did == question.stove,
                            Customer.phone_number == phone,
                            Survey.status == DRAWN,
                        )
                    )
                ).first()
                if found is None:
                    raise NotFound("This phone's household is not in that survey's sample.")
            answered_at = utcnow()
            stored = True
            try:
                async with session.begin():
                    session.add(
                        SurveyAnswer(
                            survey_id=question.survey_id,
                            stove_did=question.stove,
                            question=question.question,
                            value=value,
                            session_id=session_id,
                            phone_number=phone,
                            language=language,
                            answered_at=answered_at,
                        )
                    )
            except IntegrityError:  # answered meanwhile in another session: the first stays
                stored = False
            if stored and question.question == PEOPLE:
                await self._confirm_size(question, int(value), session_id, answered_at)
            async with session.begin():
                household, survey = found
                following = await _next_question(session, survey, question.stove)
                if following is None:
                    await session.execute(
                        update(SurveyHousehold)
                        .where(
                            SurveyHousehold.id == household.id,
                            SurveyHousehold.completed_at.is_(None),
                        )
                        .values(completed_at=utcnow())
                        .execution_options(synchronize_session=False)
                    )
        if following is None:
            self._asking = None  # read again: this phone may have nothing left to answer
        return following

    async def _confirm_size(
        self, question: Question, size: int, session_id: str, answered_at: datetime
    ) -> None:
        """The answered household size becomes the stove's recorded one, in one ledger
        write whose evidence is the survey and the USSD session (never the phone); the
        size it replaces (the enrolment value) stays in the stove's history. A stove
        deactivated since the draw keeps its record: the answer stays as evidence."""
        if self._ledger is None or self._domains is None:
            return
        async with self._ledger.write() as write:
            row = await write.session.get(Domain, question.stove, with_for_update=True)
            if row is None or row.status != ACTIVE:
                return
            before = row.properties.get("householdSize")
            evidence = {
                "surveyId": question.survey_id,
                "sessionId": session_id,
                "question": PEOPLE,
                "answeredAt": answered_at.isoformat(),
            }
            row.properties = {
                **row.properties,
                "householdSize": size,
                HOUSEHOLD_CONFIRMATION: {"householdSize": size, "enrolled": before, **evidence},
            }
            actor = Principal(f"survey:{question.survey_id}", frozenset())
            change = {"householdSize": {"from": before, "to": size, "evidence": evidence}}
            await self._domains.record_change(write, row, actor, "domain.update", change)

    async def household_confirmations(self, project: str) -> dict[str, int]:
        """How many of the project's household stoves have their recorded size confirmed
        by a survey answer, and how many carry only the size typed at enrolment (or none)."""
        async with self._sessions() as session:
            rows = await session.execute(
                select(Domain.properties)
                .join(Relationship, Relationship.source_did == Domain.did)
                .where(
                    Relationship.type == "project",
                    Relationship.target_did == project,
                    Domain.owner_customer_id.is_not(None),
                    Domain.status == ACTIVE,
                )
            )
            confirmed = unconfirmed = missing = 0
            for (properties,) in rows:
                properties = properties or {}
                if household_record(properties) is not None:
                    confirmed += 1
                elif isinstance(properties.get("householdSize"), int):
                    unconfirmed += 1
                else:
                    missing += 1
        return {"confirmed": confirmed, "unconfirmed": unconfirmed, "notRecorded": missing}


def require_reader(caller: Principal) -> None:
    """Reading surveys: any role that reads the registry, or an admin (whom the kernel's
    rule keeps out of a list naming workflow roles)."""
    if not (caller.is_admin or caller.roles & set(READERS)):
        raise Forbidden(f"This needs one of the roles: {', '.join(READERS)}.")


def _may_survey(caller: Principal) -> None:
    """Creating and drawing a survey: the proponent's, or an admin's."""
    if not (caller.is_admin or "proponent" in caller.roles):
        raise Forbidden("This needs the proponent role.")


async def _frame(session: AsyncSession, project: str) -> dict[str, tuple[str, int | None]]:
    """The project's sampling frame: each active stove a household owns -> (the owner's
    customer ID, the household size recorded for the stove, if any)."""
    rows = await session.execute(
        select(Domain.did, Domain.owner_customer_id, Domain.properties)
        .join(Relationship, Relationship.source_did == Domain.did)
        .where(
            Relationship.type == "project",
            Relationship.target_did == project,
            Domain.owner_customer_id.is_not(None),
            Domain.status == ACTIVE,
        )
    )
    frame: dict[str, tuple[str, int | None]] = {}
    for did, owner, properties in rows:
        size = (properties or {}).get("householdSize")
        recorded = size if isinstance(size, int) and not isinstance(size, bool) else None
        frame[did] = (owner, recorded)
    return frame


async def _next_question(session: AsyncSession, survey: Survey, stove: str) -> Question | None:
    """The first question of `survey` the household of `stove` has not answered."""
    answered = set(
        await session.scalars(
            select(SurveyAnswer.question).where(
                SurveyAnswer.survey_id == survey.id, SurveyAnswer.stove_did == stove
            )
        )
    )
    missing = [q for q in QUESTIONS if q not in answered]
    if not missing:
        return None
    domain = await session.get(Domain, stove)
    name = (
        stove_name({"did": stove, "metadata": domain.meta, "properties": domain.properties})
        if domain is not None
        else stove
    )
    return Question(survey.id, stove, name, missing[0], survey.household_min, survey.household_max)
