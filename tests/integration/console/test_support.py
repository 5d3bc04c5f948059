"""The support queue worked: stove problems households report over USSD are resolved through
the service, the registry API (`/v1/support/problems`), the console's Support list and the
CLI, on SQLite and PostgreSQL; each resolution is a `stove.problem_resolved` event."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Registry, unique
from tests.integration.claims.test_customers import error_of
from tests.integration.console.test_console import console, csrf_of, sign_in
from tests.integration.registry.test_write_log import writes
from tests.integration.ussd.test_logging import log_stream  # noqa: F401 (the fixture)
from tests.support.cli import base_env, run_cli
from twinhub.db.visibility import EVERYTHING
from twinhub.kernel.errors import Conflict, Invalid, NotFound
from twinhub.kernel.identifiers import customer_did
from twinhub.platform import Platform
from twinhub.services.stove_care import ProblemView, StoveCare
from twinhub.settings import Settings

OPERATOR = "did:ixo:org/support-desk"


def new_stove() -> str:
    """A stove DID no other test uses (the run's PostgreSQL database is shared)."""
    return f"did:ixo:entity/{unique('jiko')}"


async def owned_stove(registry: Registry, *controllers: str) -> str:
    """A stove (a Device domain) the given principals control: they see its problems."""
    made = await registry.client.post(
        "/v1/domains",
        json={
            "type": "Device",
            "class": "did:ixo:protocol/clean-cooking",
            "id": unique("jiko"),
            "metadata": {"name": "jiko"},
            "controller": list(controllers),
        },
    )
    assert made.status_code == 201, made.text
    return str(made.json()["did"])


def care(registry: Registry) -> StoveCare:
    found: StoveCare = registry.platform.stove_care
    return found


async def report(registry: Registry, stove: str, kind: str = "smoke") -> ProblemView:
    return await care(registry).report_problem("12345674", stove, kind)


async def events_about(registry: Registry, stove: str, type: str) -> list[Any]:
    records = await registry.platform.events.store.all_records()
    return [e for e in records if e.type == type and e.subject == stove]


async def test_resolving_a_problem_closes_it_once_and_a_new_report_opens_another(
    registry: Registry,
) -> None:
    stove = new_stove()
    problem = await report(registry, stove)
    assert problem.status == "open"
    resolved = await care(registry).resolve_problem(
        problem.reference, OPERATOR, "  New seal.  ", viewer=EVERYTHING
    )
    assert resolved.status == "resolved" and resolved.reference == problem.reference
    assert resolved.resolved_by == OPERATOR and resolved.note == "New seal."
    assert resolved.resolved_at is not None and resolved.resolved_at >= problem.reported_at
    open_now = [p.reference for p in await care(registry).open_problems(EVERYTHING, limit=1000)]
    assert problem.reference not in open_now

    # The resolution is an event, written with it, about the stove, by the operator.
    [event] = await events_about(registry, stove, "stove.problem_resolved")
    assert event.actor == OPERATOR
    assert event.data == {
        "reference": problem.reference,
        "stove": stove,
        "customer": customer_did("12345674"),
        "kind": "smoke",
        "status": "resolved",
        "reportedAt": problem.reported_at.isoformat(),
        "resolvedAt": resolved.resolved_at.isoformat(),
        "resolvedBy": OPERATOR,
        "note": "New seal.",
    }

    # Twice: a conflict, and no second event.
    with pytest.raises(Conflict, match="already resolved"):
        await care(registry).resolve_problem(
            problem.reference, OPERATOR, "again", viewer=EVERYTHING
        )
    assert len(await events_about(registry, stove, "stove.problem_resolved")) == 1

    # The same problem reported after the fix is a new problem, with its own reference.
    again = await report(registry, stove)
    assert again.reference != problem.reference and again.status == "open"
    assert again.reference in [
        p.reference for p in await care(registry).open_problems(EVERYTHING, 1000)
    ]
    assert len(await events_about(registry, stove, "stove.problem_reported")) == 2
    # ... and reported once more while open, it is that new one.
    assert (await report(registry, stove)).reference == again.reference


async def test_resolving_refuses_unknown_references_and_missing_notes(registry: Registry) -> None:
    with pytest.raises(NotFound):
        await care(registry).resolve_problem("00000000", OPERATOR, "Fixed.", viewer=EVERYTHING)
    stove = new_stove()
    problem = await report(registry, stove, "meter")
    for note in ("", "   ", "x" * 501):
        with pytest.raises(Invalid) as refused:
            await care(registry).resolve_problem(
                problem.reference, OPERATOR, note, viewer=EVERYTHING
            )
        assert [d.field for d in refused.value.details] == ["note"]
    assert await events_about(registry, stove, "stove.problem_resolved") == []
    done = await care(registry).resolve_problem(
        problem.reference, OPERATOR, "x" * 500, viewer=EVERYTHING
    )
    assert done.status == "resolved"


async def test_two_operators_resolving_at_once_one_wins(registry: Registry) -> None:
    stove = new_stove()
    problem = await report(registry, stove, "broken")
    outcomes = await asyncio.gather(
        *(
            care(registry).resolve_problem(
                problem.reference, f"{OPERATOR}-{n}", "Replaced.", viewer=EVERYTHING
            )
            for n in range(4)
        ),
        return_exceptions=True,
    )
    assert sum(isinstance(o, ProblemView) for o in outcomes) == 1
    assert sum(isinstance(o, Conflict) for o in outcomes) == 3
    assert len(await events_about(registry, stove, "stove.problem_resolved")) == 1


async def test_the_api_lists_filters_pages_and_resolves(registry: Registry) -> None:
    stove, other = await owned_stove(registry, OPERATOR), new_stove()
    first = await report(registry, stove, "smoke")
    second = await report(registry, stove, "noStart")
    third = await report(registry, stove, "other")
    elsewhere = await report(registry, other, "smoke")
    start = int((await registry.client.get("/v1/events")).json()["nextCursor"])

    listed = await registry.client.get("/v1/support/problems", params={"stove": stove})
    assert listed.status_code == 200, listed.text
    body = listed.json()
    assert [p["reference"] for p in body["items"]] == [
        first.reference,
        second.reference,
        third.reference,
    ]
    assert body["nextCursor"] is None
    assert body["items"][0] == {
        "reference": first.reference,
        "stove": stove,
        "customer": customer_did("12345674"),
        "kind": "smoke",
        "status": "open",
        "reportedAt": first.reported_at.isoformat(),
        "resolvedAt": None,
        "resolvedBy": None,
        "note": None,
    }

    # Resolve one: the answer is the resolved problem; the writer's DID is who did it.
    writer_key = await registry.key(OPERATOR, "writer")
    async with registry.as_key(writer_key) as writer:
        done = await writer.post(
            f"/v1/support/problems/{second.reference}/resolve", json={"note": "Cleaned burner."}
        )
        assert done.status_code == 200, done.text
        assert done.json()["status"] == "resolved" and done.json()["resolvedBy"] == OPERATOR
        assert done.json()["note"] == "Cleaned burner." and done.json()["resolvedAt"]
        twice = await writer.post(
            f"/v1/support/problems/{second.reference}/resolve", json={"note": "Again."}
        )
        error_of(twice, 409, "conflict")
        error_of(
            await writer.post("/v1/support/problems/0badc0de/resolve", json={"note": "x"}),
            404,
            "not_found",
        )
        error_of(
            await writer.post(f"/v1/support/problems/{first.reference}/resolve", json={}),
            422,
            "validation_failed",
        )
        blank = await writer.post(
            f"/v1/support/problems/{first.reference}/resolve", json={"note": "   "}
        )
        assert error_of(blank, 422, "validation_failed")["details"][0]["field"] == "note"
        error_of(
            await writer.post("/v1/support/problems/not-a-ref/resolve", json={"note": "x"}),
            422,
            "validation_failed",
        )

    # Filters: status, stove; both together.
    def refs(answer: Any) -> list[str]:
        assert answer.status_code == 200, answer.text
        return [p["reference"] for p in answer.json()["items"]]

    client = registry.client
    params = {"stove": stove, "status": "open"}
    assert refs(await client.get("/v1/support/problems", params=params)) == [
        first.reference,
        third.reference,
    ]
    params = {"stove": stove, "status": "resolved"}
    assert refs(await client.get("/v1/support/problems", params=params)) == [second.reference]
    every_open = refs(await client.get("/v1/support/problems", params={"status": "open"}))
    assert {first.reference, third.reference, elsewhere.reference} <= set(every_open)
    assert second.reference not in every_open
    error_of(
        await client.get("/v1/support/problems", params={"status": "closed"}),
        422,
        "validation_failed",
    )

    # Pages of one, by cursor, cover the stove's problems once each, in order.
    seen: list[str] = []
    cursor: str | None = None
    while True:
        params = {"stove": stove, "limit": "1", **({"cursor": cursor} if cursor else {})}
        page = (await client.get("/v1/support/problems", params=params)).json()
        seen += [p["reference"] for p in page["items"]]
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert seen == [first.reference, second.reference, third.reference]
    error_of(
        await client.get("/v1/support/problems", params={"cursor": "bm90LWEtbnVtYmVy"}),
        422,
        "validation_failed",
    )

    # The resolution is on /v1/events, once.
    await registry.platform.events.sequencer.run_until_idle()
    events = await client.get(
        "/v1/events", params={"after": start, "type": "stove.problem_resolved"}
    )
    items = [e for e in events.json()["items"] if e["subject"] == stove]
    assert [(e["actor"], e["data"]["reference"]) for e in items] == [(OPERATOR, second.reference)]


async def test_the_api_needs_a_key_and_resolving_needs_the_writer_role(
    registry: Registry,
) -> None:
    reader_did = f"did:ixo:org/{unique('reader')}"
    stove = await owned_stove(registry, reader_did)
    problem = await report(registry, stove)
    reader_key = await registry.key(reader_did, "reader")
    async with registry.as_key(reader_key) as reader:
        listed = await reader.get("/v1/support/problems", params={"stove": stove})
        assert [p["reference"] for p in listed.json()["items"]] == [problem.reference]
        refused = await reader.post(
            f"/v1/support/problems/{problem.reference}/resolve", json={"note": "Fixed."}
        )
        error_of(refused, 403, "forbidden")
    async with registry.as_key(None) as anonymous:
        assert (await anonymous.get("/v1/support/problems")).status_code == 401
        answer = await anonymous.post(
            f"/v1/support/problems/{problem.reference}/resolve", json={"note": "Fixed."}
        )
        assert answer.status_code == 401
    [still] = (await registry.client.get("/v1/support/problems", params={"stove": stove})).json()[
        "items"
    ]
    assert still["status"] == "open"
    assert await events_about(registry, stove, "stove.problem_resolved") == []


async def test_the_console_resolves_a_problem_from_the_support_list(registry: Registry) -> None:
    reader_did, writer_did = f"did:ixo:org/{unique('reader')}", f"did:ixo:org/{unique('support')}"
    stove = await owned_stove(registry, reader_did, writer_did)
    problem = await report(registry, stove, "noStart")
    row = f'id="problem-{problem.reference}"'
    action = f"/console/support/{problem.reference}/resolution"
    async with console(registry) as browser:
        # A reader sees the list without the form, and may not post it.
        reader_key = await registry.key(reader_did, "reader")
        token = await sign_in(browser, reader_key)
        page = await browser.get("/console/support")
        assert row in page.text and action not in page.text
        refused = await browser.post(action, data={"csrf": token, "note": "Fixed."})
        assert refused.status_code == 403
    async with console(registry) as browser:
        token = await sign_in(browser, await registry.key(writer_did, "writer"))
        page = await browser.get("/console/support")
        assert row in page.text and f'action="{action}"' in page.text
        # Without the session's CSRF token: refused, nothing resolved.
        forged = await browser.post(action, data={"csrf": "forged", "note": "Fixed."})
        assert forged.status_code == 403
        # Without a note: the page again, saying why, the problem still listed.
        empty = await browser.post(action, data={"csrf": csrf_of(page.text), "note": " "})
        assert empty.status_code == 422
        assert row in empty.text and 'id="support-error-' in empty.text
        assert "Say how the problem was resolved." in empty.text
        done = await browser.post(
            action, data={"csrf": csrf_of(page.text), "note": "Replaced the igniter."}
        )
        assert done.status_code == 303, done.text
        after = await browser.get(done.headers["location"])
        assert after.status_code == 200
        assert row not in after.text
        assert f"Problem {problem.reference} resolved." in after.text
        # Resolved already (another tab): the page says so.
        twice = await browser.post(action, data={"csrf": token, "note": "Again."})
        assert twice.status_code == 409
        assert f"Problem {problem.reference}: " in twice.text and "already resolved" in twice.text
    [event] = await events_about(registry, stove, "stove.problem_resolved")
    assert event.actor == writer_did and event.data["note"] == "Replaced the igniter."


def test_support_cli(tmp_path: Path) -> None:
    env = base_env(tmp_path)
    settings = Settings(data_dir=tmp_path / "data")
    stove = "did:ixo:entity/jiko-cli"

    async def setup() -> tuple[str, str]:
        platform = Platform(settings)
        await platform.start()
        try:
            one = await platform.stove_care.report_problem("12345674", stove, "smoke")
            two = await platform.stove_care.report_problem("12345674", stove, "meter")
            return one.reference, two.reference
        finally:
            await platform.stop()

    one, two = asyncio.run(setup())
    listed = run_cli("support", "list", env=env)
    assert listed.returncode == 0, listed.stderr
    lines = [line.split("\t") for line in listed.stdout.splitlines()]
    assert [line[:4] for line in lines] == [
        [one, "open", "smoke", stove],
        [two, "open", "meter", stove],
    ]
    resolved = run_cli("support", "resolve", one, "--note", "New chimney seal.", env=env)
    assert resolved.returncode == 0, resolved.stderr
    # What the command did, on standard output; errors and counts go to standard error.
    assert f"problem {one} resolved" in resolved.stdout and "New chimney seal." in resolved.stdout
    twice = run_cli("support", "resolve", one, "--note", "Again.", env=env)
    assert twice.returncode == 1 and "already resolved" in twice.stderr
    unknown = run_cli("support", "resolve", "0badc0de", "--note", "x", env=env)
    assert (
        unknown.returncode == 1 and "No stove problem 0badc0de" in unknown.stdout + unknown.stderr
    )
    blank = run_cli("support", "resolve", two, "--note", " ", env=env)
    assert blank.returncode == 1 and "note" in blank.stderr
    open_now = run_cli("support", "list", env=env)
    assert [line.split("\t")[0] for line in open_now.stdout.splitlines()] == [two]
    done = run_cli("support", "list", "--status", "resolved", env=env)
    [line] = done.stdout.splitlines()
    fields = line.split("\t")
    assert fields[:2] == [one, "resolved"]
    assert fields[-2:] == ["did:ixo:org/twinhub-cli", "New chimney seal."]
    both = run_cli("support", "list", "--status", "all", env=env)
    assert len(both.stdout.splitlines()) == 2
    bad = run_cli("support", "list", "--status", "closed", env=env)
    assert bad.returncode == 1
    verified = run_cli("ledger", "verify", env=env)
    assert verified.returncode == 0, verified.stderr


async def test_the_same_problem_reported_at_once_opens_one(registry: Registry) -> None:
    stove = new_stove()
    reported = await asyncio.gather(*(report(registry, stove, "meter") for _ in range(6)))
    assert len({problem.reference for problem in reported}) == 1
    assert len(await events_about(registry, stove, "stove.problem_reported")) == 1
    page = await care(registry).problems("open", stove, None, 50, viewer=EVERYTHING)
    assert [problem.reference for problem in page.items] == [reported[0].reference]


async def test_the_migration_adds_and_drops_the_resolution_columns(registry: Registry) -> None:
    """0014 on the test's backend: down to 0013 drops the resolution columns (a resolved
    problem stays out of the open queue, as 'closed'); up again adds them."""
    from alembic import command
    from sqlalchemy import Connection, inspect, text

    from twinhub.db.migrate import alembic_config

    stove = new_stove()
    problem = await report(registry, stove)
    await care(registry).resolve_problem(problem.reference, OPERATOR, "Fixed.", viewer=EVERYTHING)
    platform = registry.platform
    await platform.stop()  # no background work while the schema moves
    config = alembic_config()

    def move(connection: Connection, target: str, down: bool) -> list[str]:
        config.attributes["connection"] = connection
        (command.downgrade if down else command.upgrade)(config, target)
        return [c["name"] for c in inspect(connection).get_columns("stove_problems")]

    status = text("SELECT status FROM stove_problems WHERE reference = :r")
    async with platform.engine.begin() as connection:
        columns = await connection.run_sync(move, "0013", True)
        assert "resolved_by" not in columns and "resolution_note" not in columns
        assert await connection.scalar(status, {"r": problem.reference}) == "closed"
    async with platform.engine.begin() as connection:
        columns = await connection.run_sync(move, "head", False)
        assert {"resolved_by", "resolution_note"} <= set(columns)
        assert await connection.scalar(status, {"r": problem.reference}) == "resolved"


async def test_resolutions_are_in_the_write_log_without_their_note(
    registry: Registry,
    log_stream: io.StringIO,  # noqa: F811
) -> None:
    writer_did = f"did:ixo:org/{unique('support')}"
    api_problem = await report(registry, await owned_stove(registry, writer_did))
    console_problem = await report(registry, await owned_stove(registry, writer_did), "meter")
    note = "Spoke to the household on +254700000001 about the seal."
    writer_key = await registry.key(writer_did, "writer")
    async with registry.as_key(writer_key) as writer:
        path = f"/v1/support/problems/{api_problem.reference}/resolve"
        assert (await writer.post(path, json={"note": note})).status_code == 200
    async with console(registry) as browser:
        token = await sign_in(browser, writer_key)
        action = f"/console/support/{console_problem.reference}/resolution"
        assert (await browser.post(action, data={"csrf": token, "note": note})).status_code == 303
    lines = [
        line
        for line in writes(log_stream.getvalue())
        if line["route"]
        in ("/v1/support/problems/{reference}/resolve", "/console/support/{reference}/resolution")
    ]
    assert [(w["object"]["reference"], w["actor"], w["status"]) for w in lines] == [
        (api_problem.reference, writer_did, 200),
        (console_problem.reference, writer_did, 303),
    ]
    assert "the seal" not in log_stream.getvalue() and "+254700000001" not in log_stream.getvalue()
