"""The evidence behind the demo programme's credits: its stove models' test certificates,
its meters' calibration records, its project design document (Zambia, taking the country
defaults table's fNRB and grid factor), the verifier's accreditation and validation, and a
household survey that confirms the recorded household sizes.

Every certificate is demo data from a laboratory that does not exist, and says so in its
own text and in the source of every figure read from it. Each is stored by the SHA-256 of
its bytes; the bytes are fixed by their content, so a second run stores nothing new.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from twinhub.kernel.errors import NotFound
from twinhub.kernel.principals import Principal
from twinhub.platform import Platform

from .keys import RoleKey

LABORATORY = "Demo Cookstove Test Laboratory (fictional: demo data, not a real test)"
CALIBRATION_LAB = "Demo Meter Calibration Service (fictional: demo data)"
# Two electric pressure cooker models, case 1 of the methodology: their tested efficiency.
STOVE_MODELS = {"EPC-6L": 0.85, "EPC-8L": 0.82}
METER_MODEL = "DM-1 single-phase energy meter"
METER_ACCURACY = ("class 1", 0.01)  # IEC 62053-21 class 1: +/-1 % maximum permissible error
REGISTER_MAX = 99999.9  # kWh: the register's rollover point
SURVEY_SEED = "demo-household-survey-1"


def sha256_of(content: bytes) -> str:
    return "sha256:" + hashlib.sha256(content).hexdigest()


def test_certificate(model: str) -> bytes:
    """A stove model's test certificate (a water boiling test), as text."""
    efficiency = STOVE_MODELS[model]
    return (
        f"{LABORATORY}\nTest certificate: electric pressure cooker {model}\n"
        "Protocol: water boiling test, 3 replicates\n"
        f"Thermal efficiency: {efficiency:.2f} (mean of replicates)\n"
    ).encode()


def calibration_certificate(serial: str, calibrated_on: date) -> bytes:
    """One meter's calibration record, as text."""
    return (
        f"{CALIBRATION_LAB}\nCalibration certificate: {METER_MODEL}, serial {serial}\n"
        f"Calibrated on {calibrated_on.isoformat()}; accuracy {METER_ACCURACY[0]} "
        f"(max permissible error {METER_ACCURACY[1]:.0%})\n"
    ).encode()


def stove_model_of(n: int) -> str:
    return "EPC-8L" if n % 4 == 0 else "EPC-6L"  # one household in four cooks for more


def household_size_of(n: int) -> int:
    """The household size recorded at enrolment (3 to 7 people)."""
    return 3 + (n * 7) % 5


def meter_record(n: int, installed: date) -> tuple[dict[str, Any], bytes]:
    """Stove n's meter (design: properties.meter), calibrated a month before installation
    for two years, and its calibration certificate."""
    serial = f"DM1-{n:06d}"
    calibrated = installed - timedelta(days=30)
    certificate = calibration_certificate(serial, calibrated)
    record = {
        "model": METER_MODEL,
        "serial": serial,
        "accuracyClass": METER_ACCURACY[0],
        "maxPermissibleError": METER_ACCURACY[1],
        "calibratedOn": calibrated.isoformat(),
        "calibrationDue": (calibrated + timedelta(days=730)).isoformat(),
        "certificate": sha256_of(certificate),
        "registerMax": REGISTER_MAX,
    }
    return record, certificate


# Where the demo's households cook: districts around Lusaka (their centres, approximately,
# in decimal degrees), so the console's map has a programme to draw. Demo data.
DISTRICTS = (
    ("Lusaka", -15.42, 28.28),
    ("Chongwe", -15.33, 28.68),
    ("Kafue", -15.77, 28.18),
    ("Chibombo", -14.66, 28.07),
    ("Kabwe", -14.45, 28.45),
    ("Mazabuka", -15.86, 27.76),
)


def stove_location(n: int) -> dict[str, Any]:
    """Stove n's place: in one of the DISTRICTS, scattered up to about 10 km around its
    centre, fixed by n (a second run gives the same place)."""
    region, lat, lon = DISTRICTS[n % len(DISTRICTS)]
    digest = hashlib.sha256(f"demo-stove-{n}".encode()).digest()
    north = (digest[0] / 255 - 0.5) * 0.18
    east = (digest[1] / 255 - 0.5) * 0.18
    return {"lat": round(lat + north, 5), "lon": round(lon + east, 5), "region": region}


def stove_properties(n: int, installed: date) -> tuple[dict[str, Any], bytes]:
    """What the registry records of stove n: serial, model, fuel, household size, the
    tested efficiency (the registry's figure, read when no design document applies), the
    meter's record and where it is; and the meter's calibration certificate."""
    model = stove_model_of(n)
    meter, certificate = meter_record(n, installed)
    return {
        "serialNumber": f"EPC-{n:05d}",
        "fuelType": "electric",
        "stoveModel": model,
        "efficiency": STOVE_MODELS[model],
        "householdSize": household_size_of(n),
        "meter": meter,
        "location": stove_location(n),
    }, certificate


def _figure(value: float, unit: str, source: str, evidence: str) -> dict[str, Any]:
    return {
        "value": value,
        "unit": unit,
        "source": source,
        "year": 2026,
        "evidence": evidence,
        "status": "checked",
    }


def project_document() -> dict[str, Any]:
    """The programme's design document: methodology 2.1.0, Zambia (fNRB and the grid
    factor from the country defaults table), charcoal displaced, the meter as the measure,
    and each stove model with its tested efficiency and certificate."""
    models = {}
    for model, efficiency in STOVE_MODELS.items():
        certificate = sha256_of(test_certificate(model))
        models[model] = {
            "case": 1,
            "fuel": "electricity",
            "efficiency": _figure(
                efficiency,
                "fraction",
                f"{LABORATORY}, test certificate {model}, water boiling test",
                certificate,
            ),
            "testCertificate": certificate,
        }
    return {
        "methodology": {"id": "clean-cooking-mecd", "version": "2.1.0"},
        "country": "ZM",
        "creditingPeriod": {"from": "2026-01-01", "to": "2032-12-31"},
        "baselineFuel": "charcoal",
        "leakage": "default",
        "parameters": {},  # fNRB and EF_grid: the country defaults table's (ZM)
        "monitoringPlan": {"measure": "meter", "reportingIntervalHours": 24},
        "stoveModels": models,
    }


@dataclass(frozen=True)
class Keys:
    proponent: RoleKey
    verifier: RoleKey
    registry: RoleKey


async def store_evidence(platform: Platform, keys: Keys, items: list[tuple[bytes, str]]) -> int:
    """Store each (content, media type) by its hash as the proponent; how many were new."""
    documents = platform.project_documents
    proponent = Principal(keys.proponent.did, frozenset({"proponent", "writer"}))
    new = 0
    for content, media_type in items:
        claimed = sha256_of(content)
        try:
            await documents.attachment(claimed)
        except NotFound:
            await documents.put_attachment(content, claimed, media_type, proponent)
            new += 1
    return new


async def validated_document(platform: Platform, project: str, keys: Keys) -> list[str]:
    """The design document stored by the proponent, the verifier accredited by the
    registry and the document validated by the verifier, each step signed with its role's
    key as a client would; what this run did (nothing on a second run)."""
    documents = platform.project_documents
    done: list[str] = []
    proponent = Principal(keys.proponent.did, frozenset({"proponent", "writer"}))
    registry = Principal(keys.registry.did, frozenset({"registry", "reader"}))
    verifier = Principal(keys.verifier.did, frozenset({"verifier", "reader"}))
    certificates = [(test_certificate(model), "text/plain") for model in STOVE_MODELS]
    if await store_evidence(platform, keys, certificates):
        done.append("test certificates")
    _, created = await documents.store(project, project_document(), proponent)
    if created:
        done.append("project document")
    async with platform.sessionmaker() as session:
        accredited = await documents.accreditation_of(session, keys.verifier.did, project)
    if accredited is None:
        offered = await documents.credential_request(
            project, "accreditation", keys.verifier.did, registry
        )
        signed = keys.registry.signer.sign(offered, offered["validFrom"])
        await documents.accredit(project, signed, registry)
        done.append("accreditation")
    if (await documents.document(project))["validation"] is None:
        offered = await documents.credential_request(project, "validation", None, verifier)
        signed = keys.verifier.signer.sign(offered, offered["validFrom"])
        await documents.validate(project, signed, verifier)
        done.append("validation")
    return done


async def survey_households(
    platform: Platform, project: str, keys: Keys, phone_of: Callable[[str], str]
) -> tuple[str, int]:
    """The programme's household survey: made and drawn once (a fixed seed, so the same
    sample every time), and each sampled household answering as it would over USSD: its
    size (the recorded one: the survey confirms it), the stove in use, any other fuel.
    (survey id, answers stored this run)."""
    surveys = platform.surveys
    proponent = Principal(keys.proponent.did, frozenset({"proponent"}))
    existing = [s for s in await surveys.surveys(project) if s.seed == SURVEY_SEED]
    survey = existing[0] if existing else await surveys.create(proponent, project, seed=SURVEY_SEED)
    if survey.status != "drawn":
        survey = await surveys.draw(proponent, survey.id)
    answered = 0
    for household in await surveys.households(survey.id):
        if household.completed_at is not None:
            continue
        phone = phone_of(household.stove)
        number = int(household.stove.rsplit("-", 1)[1])
        answers = {
            "people": str(household.recorded_size or household_size_of(number)),
            "inUse": "yes",
            "otherFuel": "charcoal" if number % 6 == 0 else "none",  # some stack fuels
        }
        question = await surveys.question_for(phone)
        while question is not None and question.survey_id == survey.id:
            question = await surveys.answer(
                question,
                answers[question.question],
                phone,
                f"demo-survey-{number:05d}",
                "en",
            )
            answered += 1
    return survey.id, answered
