"""Retiring credits produces a certificate (issue 29 §7): signed by the platform's key,
naming the beneficiary, the amount and the period (by its registry-signed issuance
credential) the credits came from; anyone fetches and checks it with no API key, through
the real ASGI stack; a changed certificate fails the check."""

from __future__ import annotations

import copy
import os

from tests.conftest import Registry
from tests.support.claims_world import METERED_AMOUNT
from tests.support.workflow_world import build_workflow
from twinhub.security.jcs import digest
from twinhub.security.signing import Issuer


async def test_a_retirement_certificate_names_the_period_and_checks_publicly(
    registry: Registry,
) -> None:
    flow = await build_workflow(registry)
    stove = await flow.stove()
    period = (await flow.draft())["id"]
    await flow.through(period, [stove])
    base = f"/v1/domains/{flow.project}/monitoring-periods/{period}"
    issuance = (await flow.verifier.client.get(f"{base}/chain")).json()["items"][-1]
    retire = "/v1/credits/CARBON/retirements"

    # Bad input: a beneficiary that is no text is refused, and nothing is retired.
    refused = await flow.proponent.client.post(
        retire, json={"amount": 1000, "reason": "2026 offset", "beneficiary": "\n"}
    )
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["details"][0]["field"] == "beneficiary"
    held = await registry.platform.credits.balances(flow.proponent.did)
    assert [b["amount"] for b in held if b["token"] == "CARBON"] == [METERED_AMOUNT]

    retired = await flow.proponent.client.post(
        retire, json={"amount": 1000, "reason": "2026 offset", "beneficiary": "Acme Ltd"}
    )
    assert retired.status_code == 201, retired.text
    url = retired.json()["certificate"]["url"]
    assert url == f"/v1/retirements/{retired.json()['id']}/certificate"

    async with registry.as_key(None) as anyone:  # public: no API key
        answer = await anyone.get(url)
        assert answer.status_code == 200, answer.text
        found = answer.json()
        certificate, check = found["certificate"], found["check"]
        assert check["verified"] and check["problems"] == [], check
        assert check["issuedByThisPlatform"]
        subject = certificate["credentialSubject"]
        assert certificate["type"] == ["VerifiableCredential", "CreditRetirementCredential"]
        assert subject["id"] == flow.proponent.did and subject["beneficiary"] == "Acme Ltd"
        assert subject["amount"] == 1000 and subject["token"] == "CARBON"
        [source] = subject["sources"]
        assert source["amount"] == 1000 and source["project"] == flow.project
        assert source["period"]["id"] == period
        # The chain continues: the certificate names the registry's signed issuance.
        assert source["credential"]["digest"] == digest(issuance)
        assert source["credential"]["issuer"] == flow.registry.did
        assert check["sources"][0]["verified"]

        # Changed after signing: the check fails, naming the proof.
        tampered = copy.deepcopy(certificate)
        tampered["credentialSubject"]["amount"] = 999_000
        checked = await anyone.post(
            "/v1/retirement-certificates/verification", json={"certificate": tampered}
        )
        assert checked.status_code == 200, checked.text
        assert not checked.json()["verified"]
        assert [p["field"] for p in checked.json()["problems"]] == ["certificate.proof"]
        # Signed anew by another key: not this platform's.
        forger = Issuer(os.urandom(32))
        unsigned = {k: v for k, v in tampered.items() if k != "proof"}
        forged = forger.sign({**unsigned, "issuer": forger.did}, unsigned["validFrom"])
        checked = (
            await anyone.post(
                "/v1/retirement-certificates/verification", json={"certificate": forged}
            )
        ).json()
        assert not checked["verified"] and not checked["issuedByThisPlatform"]
        assert checked["problems"][0]["field"] == "certificate.issuer"
        # The one issued checks as given back.
        intact = await anyone.post(
            "/v1/retirement-certificates/verification", json={"certificate": certificate}
        )
        assert intact.json()["verified"], intact.text
        missing = await anyone.get("/v1/retirements/999999999/certificate")
        assert missing.status_code == 404, missing.text

    # A second retirement takes the credits after the first (first in, first out).
    again = await flow.proponent.client.post(retire, json={"amount": 500, "reason": "more"})
    assert again.status_code == 201, again.text
    second = await registry.platform.credits.certificates.certificate(again.json()["id"])
    assert second["check"]["verified"]
    assert second["certificate"]["credentialSubject"]["beneficiary"] == flow.proponent.did
    listed = await registry.platform.credits.certificates.listed(naming=digest(issuance))
    assert [c["credentialSubject"]["amount"] for c in listed] == [500, 1000]
