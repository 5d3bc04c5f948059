"""The MQTT client id a worker subscribes as (issue 31, point 2): the same for the same
deployment and worker whatever the process, distinct per worker and per deployment."""

from __future__ import annotations

import os
from pathlib import Path

from twinhub.settings import Settings
from twinhub.telemetry.bootstrap import mqtt_client_id

POSTGRES = "postgresql://twinhub:{}@db.example:5432/twinhub"


def _id(worker: int = 0, **values: object) -> str:
    values = {"mqtt_client_id": "", **values}  # whatever the environment says
    settings = Settings(environment="test", mqtt_url="mqtt://127.0.0.1:1883", **values)
    return mqtt_client_id(settings.telemetry, settings.storage, worker)


def test_the_default_id_names_the_deployment_and_the_worker_not_the_process() -> None:
    first = _id(database_url=POSTGRES.format("secret"))
    assert str(os.getpid()) not in first
    assert first == _id(database_url=POSTGRES.format("secret"))  # a restart: the same
    assert first.startswith("twinhub-") and first.endswith("-0") and len(first) <= 23
    # Rotating the database password is no new deployment; the password is not in it.
    assert _id(database_url=POSTGRES.format("rotated")) == first
    assert "secret" not in first
    assert _id(1, database_url=POSTGRES.format("secret")) == first[:-1] + "1"
    assert _id(database_url=POSTGRES.format("secret").replace("/twinhub", "/other")) != first
    assert _id(database_url=POSTGRES.format("s"), mqtt_topic_prefix="fleet-b") != first
    assert _id(database_url=POSTGRES.format("s"), mqtt_shared_group="other") != first


def test_sqlite_deployments_are_told_apart_by_their_file(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    assert _id(data_dir=one, database_url=None) == _id(data_dir=one, database_url=None)
    assert _id(data_dir=one, database_url=None) != _id(data_dir=two, database_url=None)


def test_a_configured_id_is_used_as_given_with_the_worker_appended_after_the_first() -> None:
    assert _id(mqtt_client_id="site-a") == "site-a"
    assert _id(2, mqtt_client_id="site-a") == "site-a-2"
