"""Schema-driven fuzzing (issue 15.9, 31.9) of the registry API (`/openapi.json`), its
GraphQL schema (`/graphql`, by introspection) and the chain REST gateway
(`/swagger/openapi.json`) with Schemathesis, against a real `twinhub serve api` process with
a write-capable (admin) key and the rate limits raised: no answer may be a 5xx (a 503 too:
the database is up all along, so a 503 is bad data taken for an outage), nor a GraphQL
error masking an internal failure, and every REST answer must match the documented status
codes, headers, content type and response schema.

The default run keeps a short budget (`TWINHUB_FUZZ_EXAMPLES`, 3 examples an operation);
`./dev fuzz` runs the same with a long one. The USSD gateway's property-based fuzz is
`tests/integration/ussd/test_ussd_properties.py` (also lengthened by `./dev fuzz`).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import schemathesis
import schemathesis.graphql
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.graphql import nodes
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.conftest import fresh_postgres_database
from tests.support.served import serving

EXAMPLES = int(os.environ.get("TWINHUB_FUZZ_EXAMPLES", "3"))
KEY = secrets.token_urlsafe(32)


@schemathesis.check
def no_server_failure(
    ctx: object, response: schemathesis.Response, case: schemathesis.Case
) -> None:
    """No 5xx, except the gateway's documented 501 (code 12) for the ixo queries twinhub
    keeps no data for (deposits, say), as a Cosmos node without a module answers."""
    if response.status_code == 501 and response.json().get("code") == 12:
        return
    if response.status_code >= 500:
        raise AssertionError(f"{response.status_code}: {response.text[:300]}")


# A rejection of a well-formed request is allowed where the parameters depend on each other,
# which no JSON Schema of one parameter can say: a summary's period (`from` before `to`, at
# most 366 days); a customer search by exactly one of `phone` and `id`.
CROSS_PARAMETER = {("GET", "/v1/domains/{did}/summary"), ("GET", "/v1/customers")}


@schemathesis.check
def documented_parameters_accepted(
    ctx: object, response: schemathesis.Response, case: schemathesis.Case
) -> None:
    """A request whose parameters (path, query, headers) follow their documented schema is
    never refused for one of them (issue 15.6): the document must say which strings a cursor
    or an If-Match may be. Request bodies are judged by the checks above only: their rules
    across fields (a DID that must exist, a reason a flagged evaluation needs) are the
    service's, answered 422 with one detail per field."""
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive or response.status_code != 422:
        return
    if (case.method.upper(), case.operation.path) in CROSS_PARAMETER:
        return
    named = {
        name.lower()
        for values in (case.query, case.headers, case.path_parameters)
        for name in (values or {})
    } - {"authorization"}
    details = response.json().get("error", {}).get("details", [])
    refused = sorted({d["field"] for d in details if str(d.get("field", "")).lower() in named})
    if refused:
        raise AssertionError(f"documented parameters refused: {refused}: {response.text[:300]}")


INTERNAL_ERROR = "Internal error; logged."  # registry.graphql's mask of its own failures


@schemathesis.check
def no_graphql_failure(
    ctx: object, response: schemathesis.Response, case: schemathesis.Case
) -> None:
    """No 5xx, and no GraphQL error that masks a failure of the registry itself: a bad
    argument is a GraphQL error naming it, never an internal one."""
    no_server_failure(ctx, response, case)
    if "json" not in response.headers.get("content-type", [""])[0]:
        return
    body = response.json()
    errors = body.get("errors") if isinstance(body, dict) else None
    for error in errors or []:
        if error.get("message") == INTERNAL_ERROR:
            raise AssertionError(f"internal GraphQL failure: {response.text[:300]}")


# The registry's own scalars: what a client may send for each (schemathesis generates the
# standard ones itself). Long holds 64-bit amounts; DateTime is ISO 8601; JSON any value.
schemathesis.graphql.scalar(
    "Long", st.integers(min_value=-(2**63), max_value=2**63 - 1).map(nodes.Int)
)
schemathesis.graphql.scalar(
    "DateTime",
    st.one_of(
        st.datetimes().map(lambda moment: nodes.String(moment.isoformat() + "Z")),
        st.text(max_size=30).map(nodes.String),
    ),
)
schemathesis.graphql.scalar("JSON", st.text(max_size=30).map(nodes.String))

CHECKS = [
    no_server_failure,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
FUZZ_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture(scope="module")
async def fuzz_database() -> AsyncIterator[str]:
    """A PostgreSQL database of the run's own: where bad data reaches a real server's data
    errors (a NUL byte, an out-of-range integer or date), which must never read as an
    outage (a 503) nor a 500."""
    async with fresh_postgres_database("fuzz") as url:
        yield url


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, fuzz_database: str
) -> Iterator[dict[str, str]]:
    data = Path(tmp_path_factory.mktemp("fuzz")) / "data"
    with serving(
        data,
        "api",
        wait_for=("registry", "gateway"),
        LOG_LEVEL="error",
        DATABASE_URL=fuzz_database,
        TWINHUB_BOOTSTRAP_API_KEY=KEY,
        REGISTRY_RATE_LIMIT="100000000/minute",
        GATEWAY_RATE_LIMIT="100000000/minute",
    ) as urls:
        yield urls


def fuzz(
    schema: schemathesis.BaseSchema, headers: dict[str, str], checks: list[object] = CHECKS
) -> int:
    """Every operation of the schema, EXAMPLES cases each, every check; the cases run.
    Every operation runs even after one fails, so a run names each failing operation.

    (Schemathesis' own pytest integration does not run under this pytest; each operation
    becomes a hypothesis test here instead.)"""
    ran = 0
    failures: list[str] = []
    for result in schema.get_all_operations():
        operation = result.ok()

        @given(case=operation.as_strategy())
        @FUZZ_SETTINGS
        def check(case: schemathesis.Case) -> None:
            nonlocal ran
            ran += 1
            case.call_and_validate(headers=headers, checks=checks)

        try:
            check()
        except Exception as failure:  # collected, reported together below
            failures.append(f"{operation.label}: {failure}"[:2000])
    assert not failures, "\n\n".join(failures)
    return ran


def test_registry_answers_as_documented(served: dict[str, str]) -> None:
    ran = fuzz(
        schemathesis.openapi.from_url(f"{served['registry']}/openapi.json"),
        {"Authorization": f"Bearer {KEY}"},
        [*CHECKS, documented_parameters_accepted],
    )
    assert ran >= 40  # every operation was reached


def test_graphql_never_fails(served: dict[str, str]) -> None:
    """Every query field of the registry's GraphQL schema, with generated arguments."""
    headers = {"Authorization": f"Bearer {KEY}"}
    schema = schemathesis.graphql.from_url(f"{served['registry']}/graphql", headers=headers)
    ran = fuzz(schema, headers, [no_graphql_failure])
    assert ran >= 9  # every query field was reached


def test_gateway_answers_as_documented(served: dict[str, str]) -> None:
    ran = fuzz(schemathesis.openapi.from_url(f"{served['gateway']}/swagger/openapi.json"), {})
    assert ran >= 20
