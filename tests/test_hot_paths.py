"""The hot request paths of issue #14's ceiling ratios keep their contracts: the registry's
`GET /v1/domains/{did}` read through the read model answers exactly what the domain service
builds, the USSD form parser reads exactly what `parse_qsl` reads, and the in-process rate
counter follows the sliding-window arithmetic of the `limits` library it stands in for."""

from __future__ import annotations

from urllib.parse import parse_qsl

from hypothesis import given, settings
from hypothesis import strategies as st
from limits import parse

from tests.conftest import Registry
from twinhub.registry.routes import DID_PATH, HotRoute
from twinhub.ussd.request import InvalidRequest, _form_fields
from twinhub.web.ratelimit import MemoryCounter


async def test_get_domain_answers_the_services_record_and_sees_every_write(
    registry: Registry,
) -> None:
    async def create(**fields: object) -> dict:
        body = {"type": "Organisation", "class": "did:ixo:protocol/organisation", **fields}
        response = await registry.client.post("/v1/domains", json=body)
        assert response.status_code == 201, response.text
        return response.json()

    protocol = await registry.client.get("/v1/protocols/did:ixo:protocol/organisation")
    role, kind = sorted(protocol.json()["effective"]["relationships"].items())[0]
    target = await create(
        type=kind, metadata={"name": "Target"}, **{"class": f"did:ixo:protocol/{kind.lower()}"}
    )
    source = await create(metadata={"name": "Source Co-op"})
    related = await registry.client.post(
        f"/v1/domains/{source['did']}/relationships", json={"type": role, "target": target["did"]}
    )
    assert related.status_code == 200, related.text
    response = await registry.client.get(f"/v1/domains/{source['did']}")
    assert response.status_code == 200
    assert response.json() == await registry.platform.domains.get(source["did"])
    assert response.headers["etag"] == f'"{response.json()["version"]}"'
    assert {"type": role, "target": target["did"]} in response.json()["relationships"]
    if registry.settings.resolved_database_url.startswith("sqlite"):
        assert registry.app.state.reads.fast  # the read model answered, not the service

    patched = await registry.client.patch(
        f"/v1/domains/{source['did']}", json={"metadata": {"name": "Renamed Co-op"}}
    )
    assert patched.status_code == 200, patched.text
    again = (await registry.client.get(f"/v1/domains/{source['did']}")).json()
    assert again["metadata"]["name"] == "Renamed Co-op"  # the write is read back at once
    assert again["version"] == patched.json()["version"]

    # Without a query string the plain endpoint answers (counted under the route's usual
    # label); ?version= goes on to FastAPI's route, which validates it.
    assert isinstance(registry.app.router.routes[0], HotRoute)
    labels = {"method": "GET", "route": f"/v1/domains/{DID_PATH}", "status": "200"}
    metrics = registry.app.state.metrics.registry
    counted = metrics.get_sample_value("twinhub_registry_requests_total", labels) or 0
    assert (await registry.client.get(f"/v1/domains/{source['did']}")).json() == again
    assert metrics.get_sample_value("twinhub_registry_requests_total", labels) == counted + 1
    url = f"/v1/domains/{source['did']}"
    first = (await registry.client.get(url, params={"version": 1})).json()
    assert first["version"] == 1 and first["metadata"]["name"] == "Source Co-op"
    invalid = await registry.client.get(url, params={"version": 0})
    assert invalid.status_code == 422 and invalid.json()["error"]["code"] == "validation_failed"

    unknown = await registry.client.get("/v1/domains/did:ixo:entity/nobody-here")
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "not_found"
    assert (await registry.client.get("/v1/domains/not-a-did")).status_code == 404
    async with registry.as_key(None) as anonymous:
        refused = await anonymous.get(f"/v1/domains/{source['did']}")
        assert refused.status_code == 401
    async with registry.as_key("thk_nokey_nosecret") as stranger:
        assert (await stranger.get(f"/v1/domains/{source['did']}")).status_code == 401
    document = (await registry.client.get("/openapi.json")).json()
    assert document["paths"]["/v1/domains/{did}"]["get"]["security"] == [{"HTTPBearer": []}]


def _reference_form(body: bytes) -> dict[str, str] | None:
    try:
        text = body.decode("utf-8")
        pairs = parse_qsl(text, keep_blank_values=True, strict_parsing=bool(body))
    except (UnicodeDecodeError, ValueError):
        return None
    fields: dict[str, str] = {}
    for name, value in pairs:
        if name in fields:
            return None
        fields[name] = value
    return fields


PIECES = st.sampled_from([*"ab=&%+*#0;é", "%2A", "%2B", "%zz", "%C3%A9", "%FF", "&&", "=="])


@settings(max_examples=3000, deadline=None)
@given(st.lists(PIECES, max_size=14).map("".join).map(str.encode) | st.binary(max_size=12))
def test_the_form_parser_reads_what_parse_qsl_reads(body: bytes) -> None:
    try:
        mine: dict[str, str] | None = _form_fields(body)
    except InvalidRequest:
        mine = None
    assert mine == _reference_form(body)


def test_the_memory_counter_is_a_sliding_window() -> None:
    now = [1000.0]  # 40 s into a minute window
    counter = MemoryCounter(parse("3/minute"), clock=lambda: now[0])
    assert [counter.hit("a") for _ in range(3)] == [None, None, None]
    assert counter.hit("a") == 20  # until the window ends, where its 3 weigh 3 (then less)
    assert counter.hit("b") is None  # each client has its own budget
    now[0] = 1061.0  # 41 s into the next window: the previous 3 weigh 3 * 19/60 = 0.95
    assert [counter.hit("a") for _ in range(3)] == [None, None, None]
    assert counter.hit("a") == 19
    now[0] = 1300.0  # two windows idle: forgotten, a full budget again
    assert [counter.hit("a") for _ in range(3)] == [None, None, None]
    assert len(counter._windows) == 1  # "b" was swept
