"""Household surveys: a programme's proponent creates a survey of a project and draws its
sample (once); readers of the registry see the sample, the answers households gave over
USSD (with the session of each, as evidence) and the results with their achieved
precision; and a project's sampled parameters as a period computation reads them.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import Field

from twinhub.kernel.principals import Principal
from twinhub.registry.auth import principal
from twinhub.registry.errors import ERROR_RESPONSES
from twinhub.registry.params import NO_NUL, documented
from twinhub.registry.schemas import Body
from twinhub.services.surveys import SEED_MAX, SurveyService, require_reader

router = APIRouter(prefix="/v1/surveys", responses=ERROR_RESPONSES, tags=["surveys"])
SURVEY_ID_PATTERN = r"^sv_[0-9a-f]{16}$"
SurveyId = Annotated[str, Path(pattern=SURVEY_ID_PATTERN, description="The survey's id")]
Caller = Annotated[Principal, Depends(principal)]
Project = Annotated[
    str,
    Query(description="The project's DID", json_schema_extra=documented(pattern=NO_NUL)),
]


class SurveyIn(Body):
    """A new survey; every setting but the project has a default (USSD_SURVEY_*)."""

    project: str = Field(min_length=1, max_length=200, description="The project's DID")
    confidence: float | None = Field(None, description="Confidence level, e.g. 0.9")
    precision: float | None = Field(None, description="Target relative precision, e.g. 0.1")
    expectedCv: float | None = Field(
        None, description="Expected coefficient of variation, which sizes the sample"
    )
    sampleSize: int | None = Field(None, description="Households to draw; absent: planned")
    householdMin: int | None = Field(None, description="Fewest people a household may answer")
    householdMax: int | None = Field(None, description="Most people a household may answer")
    seed: str | None = Field(
        None, max_length=SEED_MAX, description="The draw's seed; absent: a random one"
    )


def _surveys(request: Request) -> SurveyService:
    surveys: SurveyService = request.app.state.platform.surveys
    return surveys


@router.post(
    "",
    status_code=201,
    summary="Create a survey of a project's households (proponent)",
)
async def create_survey(request: Request, caller: Caller, body: SurveyIn) -> dict[str, Any]:
    given = body.model_dump(exclude_none=True)
    project = given.pop("project")
    survey = await _surveys(request).create(caller, project, **given)
    return survey.as_json()


@router.get("", summary="Surveys, newest first (reader)")
async def list_surveys(
    request: Request,
    caller: Caller,
    project: Annotated[
        str | None,
        Query(description="Only this project's", json_schema_extra=documented(pattern=NO_NUL)),
    ] = None,
) -> dict[str, Any]:
    require_reader(caller)
    surveys = await _surveys(request).surveys(project or None)
    return {"items": [survey.as_json() for survey in surveys]}


@router.get(
    "/parameters",
    summary="A project's sampled parameters and surveyed household sizes (reader)",
)
async def sampled_parameters(request: Request, caller: Caller, project: Project) -> dict[str, Any]:
    require_reader(caller)
    surveys = _surveys(request)
    return {
        "project": project,
        "parameters": await surveys.sampled_parameters(project),
        "householdSizes": await surveys.household_sizes(project),
    }


@router.post(
    "/{survey_id}/draw",
    summary="Draw the survey's sample from its seed, once (proponent)",
    responses={409: {"description": "conflict: the sample was drawn already"}},
)
async def draw_sample(request: Request, caller: Caller, survey_id: SurveyId) -> dict[str, Any]:
    survey = await _surveys(request).draw(caller, survey_id)
    return survey.as_json()


@router.get("/{survey_id}", summary="A survey and its results so far (reader)")
async def survey_results(request: Request, caller: Caller, survey_id: SurveyId) -> dict[str, Any]:
    require_reader(caller)
    return await _surveys(request).results(survey_id)


@router.get(
    "/{survey_id}/households",
    summary="The sample in draw order, with each household's answers (reader)",
)
async def survey_households(
    request: Request, caller: Caller, survey_id: SurveyId
) -> dict[str, Any]:
    require_reader(caller)
    surveys = _surveys(request)
    await surveys.survey(survey_id)  # 404 for an unknown survey, not an empty list
    return {"items": [h.as_json() for h in await surveys.households(survey_id)]}
