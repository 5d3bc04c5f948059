"""Live streams across workers: with Redis, a reading stored by one process reaches the
event streams held by every other process of the same platform (same key prefix), once;
a Redis outage costs only the relayed events (counted) and the relay comes back by itself.

Two "processes" here are two Platforms in one test on the same database and Redis prefix,
as `twinhub serve --workers 2` runs them."""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import uvicorn
from redis.asyncio import Redis
from structlog.testing import capture_logs

from tests.conftest import (
    BOOTSTRAP_KEY,
    REDIS_URL,
    Backend,
    Registry,
    free_port,
    running_registry,
)
from tests.integration.telemetry.test_telemetry_live import events
from tests.support.telemetry_world import at, build_farm
from twinhub.mrv.telemetry_schema import Reading
from twinhub.registry.app import create_registry_app
from twinhub.settings import Settings
from twinhub.telemetry import live
from twinhub.telemetry.live import RESYNC, LiveHub, encode, live_channel
from twinhub.telemetry.service import sse_frame

QUIET_SECONDS = 0.5  # how long "nothing more arrives" is watched for


@pytest.fixture
def backend() -> Backend:
    """Several workers need Redis (and, in production, PostgreSQL)."""
    return Backend("postgresql", "redis")


Workers = Callable[..., Awaitable[tuple[Registry, Registry]]]


@pytest.fixture
async def make_workers(settings_for: Callable[..., Settings]) -> AsyncIterator[Workers]:
    """Two registries on two platforms sharing one database and one Redis prefix (settings
    overrides allowed); they stop at the end."""
    async with AsyncExitStack() as stack:

        async def start(**overrides: Any) -> tuple[Registry, Registry]:
            settings = settings_for(twinhub_bootstrap_api_key=BOOTSTRAP_KEY, **overrides)
            first = await stack.enter_async_context(running_registry(settings))
            second = await stack.enter_async_context(running_registry(settings))
            return first, second

        yield start


@pytest.fixture
async def workers(make_workers: Workers) -> tuple[Registry, Registry]:
    return await make_workers()


async def next_event(queue: asyncio.Queue[dict[str, Any]]) -> dict[str, Any]:
    return await asyncio.wait_for(queue.get(), 10)


async def nothing_more(*queues: asyncio.Queue[dict[str, Any]]) -> None:
    await asyncio.sleep(QUIET_SECONDS)
    left = [[q.get_nowait() for _ in range(q.qsize())] for q in queues]
    assert left == [[]] * len(queues)


def readings(count: int, now: datetime, first_seq: int = 1) -> list[dict[str, Any]]:
    return [
        {"seq": first_seq + i, "time": at(now, -0.001 * (count - i)), "values": {"meterKwh": i}}
        for i in range(count)
    ]


async def test_a_reading_stored_by_one_worker_reaches_every_worker_once(
    workers: tuple[Registry, Registry], settings_for: Callable[..., Settings], redis_prefix: str
) -> None:
    a, b = workers
    farm = await build_farm(a)
    stove = await farm.stove()
    other_settings = settings_for(
        twinhub_bootstrap_api_key=BOOTSTRAP_KEY,
        redis_key_prefix=f"{redis_prefix}{secrets.token_hex(3)}:",
    )
    async with (
        running_registry(other_settings) as elsewhere,  # another platform on the same Redis
        a.platform.telemetry.live.subscribe(stove) as on_a,
        b.platform.telemetry.live.subscribe(stove) as on_b,
        b.platform.telemetry.live.subscribe(farm.project) as project_on_b,
        elsewhere.platform.telemetry.live.subscribe(stove) as on_elsewhere,
    ):
        assert b.platform.telemetry.live.relayed
        sent = await farm.send(stove, readings(2, datetime.now(UTC)))
        assert sent.json()["accepted"] == 2
        for queue in (on_a, on_b, project_on_b):
            got = await next_event(queue)
            assert got["event"] == "readings" and got["device"] == stove
            assert got["count"] == 2 and got["latest"]["seq"] == 2
            assert await next_event(queue) == {"event": "state", "device": stove, "online": True}
        # The same event, whichever process it came from: the same SSE frame.
        await farm.send(stove, readings(1, datetime.now(UTC), first_seq=3))
        local, relayed = await next_event(on_a), await next_event(on_b)
        assert local == relayed and sse_frame(local) == sse_frame(relayed)
        assert (await next_event(project_on_b))["latest"]["seq"] == 3
        await nothing_more(on_a, on_b, project_on_b, on_elsewhere)
    assert a.platform.telemetry.live.relay_dropped == 0


async def test_one_worker_reports_a_twin_offline_to_every_worker_once(
    make_workers: Workers,
) -> None:
    """The offline watch of each worker runs; one reports the twin (the store sees to it),
    and its event reaches the twin's and the project's streams of both workers once, even
    when the reporting worker never saw the twin's readings (nothing cached)."""
    a, b = await make_workers(telemetry_offline_after_seconds=2)
    farm = await build_farm(a)
    stove = await farm.stove()
    hubs = (a.platform.telemetry.live, b.platform.telemetry.live)
    async with AsyncExitStack() as stack:
        queues = [
            await stack.enter_async_context(hub.subscribe(topic))
            for hub in hubs
            for topic in (stove, farm.project)
        ]
        now = datetime.now(UTC)
        sent = await farm.send(
            stove, [{"seq": 1, "time": at(now, -0.00001), "values": {"meterKwh": 1}}]
        )
        assert sent.json()["accepted"] == 1
        for queue in queues:
            assert (await next_event(queue))["event"] == "readings"
            assert (await next_event(queue))["online"] is True
        a.platform.telemetry._info.clear()  # as if A had restarted since
        offline = {"event": "state", "device": stove, "online": False}
        for queue in queues:
            assert await asyncio.wait_for(queue.get(), 15) == offline
        await nothing_more(*queues)


async def test_a_browser_of_one_worker_sees_readings_posted_to_another(
    workers: tuple[Registry, Registry],
) -> None:
    """Through real HTTP: the stream is served by B (uvicorn), the readings posted to A."""
    a, b = workers
    farm = await build_farm(a)
    stove = await farm.stove()
    async with stream_of(b, stove) as lines:
        first = await asyncio.wait_for(events(lines, 1), 10)
        assert first[0]["kind"] == "state" and first[0]["online"] is False
        now = datetime.now(UTC)
        assert (await farm.send(stove, readings(2, now))).json()["accepted"] == 2
        got = await asyncio.wait_for(events(lines, 2), 10)
        assert got[0]["kind"] == "readings" and got[0]["latest"]["seq"] == 2
        assert got[1] == {"kind": "state", "event": "state", "device": stove, "online": True}
        # Exactly once: the next event is the next batch's, not a repeat of the first.
        assert (await farm.send(stove, readings(1, now, first_seq=3))).status_code == 200
        after = await asyncio.wait_for(events(lines, 1), 10)
        assert after[0]["kind"] == "readings" and after[0]["latest"]["seq"] == 3


@asynccontextmanager
async def stream_of(registry: Registry, did: str) -> AsyncIterator[AsyncIterator[str]]:
    """The lines of `did`'s event stream, served by `registry`'s platform under uvicorn
    (real HTTP: httpx's ASGI transport hands over a response only once it has ended)."""
    port = free_port()
    app = create_registry_app(platform=registry.platform)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:  # noqa: ASYNC110 (uvicorn offers no event to wait on)
            await asyncio.sleep(0.02)
        headers = {"Authorization": f"Bearer {BOOTSTRAP_KEY}"}
        async with (
            httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=10
            ) as client,
            client.stream("GET", f"/v1/domains/{did}/events") as response,
        ):
            yield response.aiter_lines()
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 10)


async def test_a_stream_answers_a_gap_with_the_twins_state_as_it_is_now(
    workers: tuple[Registry, Registry], redis_prefix: str
) -> None:
    """Another process's publisher that dropped events says so on the channel when Redis
    is back; an open stream then sends the twin's state again, with what was stored
    meanwhile (here through the other worker while the stream is held by this one)."""
    a, b = workers
    farm = await build_farm(a)
    stove = await farm.stove()
    async with stream_of(b, stove) as lines:
        first = await asyncio.wait_for(events(lines, 1), 10)
        assert first[0]["kind"] == "state" and first[0]["online"] is False
        # Stored by the store alone, which publishes nothing: as if the event had been lost.
        reading = Reading(1, datetime.now(UTC), {"meterKwh": 5.0})
        await a.platform.telemetry.store.store_batch(stove, [reading], [], "meterKwh", [])
        redis = Redis.from_url(REDIS_URL)
        try:
            channel = live_channel(a.settings.storage.redis_key_prefix)
            await redis.publish(channel, encode("a-publisher-that-dropped", [], RESYNC))
        finally:
            await redis.aclose()
        again = (await asyncio.wait_for(events(lines, 1), 10))[0]
        assert again["kind"] == "state" and again["did"] == stove
        assert again["lastSeq"] == 1 and again["readings"] == 1 and again["online"] is True


# -- the hub on its own -------------------------------------------------------------------


@pytest.fixture
async def channel(redis_prefix: str) -> str:
    return live_channel(f"{redis_prefix}{secrets.token_hex(3)}:")


@pytest.fixture
async def hubs(channel: str) -> AsyncIterator[Callable[[str], LiveHub]]:
    """Make started hubs on `channel` (a Redis URL each); all stop at the end."""
    made: list[tuple[LiveHub, Redis]] = []

    def make(url: str = REDIS_URL) -> LiveHub:
        redis = Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
        hub = LiveHub(redis, channel)
        hub.start()
        made.append((hub, redis))
        return hub

    yield make
    for hub, redis in made:
        await hub.stop()
        await redis.aclose()


async def test_relayed_events_are_what_local_subscribers_get(
    hubs: Callable[[str], LiveHub],
) -> None:
    """Values JSON has no type for reach other processes as the SSE frame writes them."""
    a, b = hubs(REDIS_URL), hubs(REDIS_URL)
    event = {
        "event": "readings",
        "device": "did:x",
        "count": 1,
        "latest": {"seq": 1, "time": "2026-01-01T00:00:00+00:00", "meterKwh": 0.1, "on": True},
        "at": datetime(2026, 1, 2, 3, 4, 5, 6000, tzinfo=UTC),
        "pair": (1, None),
    }
    async with a.subscribe("did:x") as on_a, b.subscribe("did:x") as on_b:
        a.publish(["did:x", "did:project"], event)
        local, relayed = await next_event(on_a), await next_event(on_b)
        assert local is event
        assert relayed == json.loads(json.dumps(event, default=str))
        assert sse_frame(relayed) == sse_frame(local)
        b.publish(["did:x"], {"event": "state", "device": "did:x", "online": False})
        assert (await next_event(on_a))["online"] is False
        assert (await next_event(on_b))["online"] is False
        await nothing_more(on_a, on_b)


async def test_a_slow_subscriber_loses_relayed_events_counted(
    hubs: Callable[[str], LiveHub], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(live, "QUEUE_SIZE", 2)
    a, b = hubs(REDIS_URL), hubs(REDIS_URL)
    async with b.subscribe("did:x") as slow, b.subscribe("did:x") as fast:
        for seq in range(5):
            a.publish(["did:x"], {"event": "readings", "seq": seq})
            assert (await next_event(fast))["seq"] == seq
        assert [slow.get_nowait()["seq"] for _ in range(2)] == [0, 1]
        assert b.dropped == 3


class Proxy:
    """A TCP relay to the test Redis, switched off and on to make an outage."""

    def __init__(self) -> None:
        target = urlsplit(REDIS_URL)
        self.target = (target.hostname or "127.0.0.1", target.port or 6379)
        self.port = free_port()
        self.server: asyncio.Server | None = None
        self.writers: list[asyncio.StreamWriter] = []

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/{urlsplit(REDIS_URL).path.strip('/') or 0}"

    async def up(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)

    async def down(self) -> None:
        if self.server is not None:
            self.server.close()
            for writer in self.writers:
                writer.close()
            self.writers = []
            await self.server.wait_closed()
            self.server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        self.writers += [writer, up_writer]

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            try:
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                sink.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))


async def until_relayed(
    sender: LiveHub, queue: asyncio.Queue[dict[str, Any]], seconds: float = 15
) -> dict[str, Any]:
    """Publish on `sender` until one of its events reaches `queue` (a relay coming back);
    that event. Others' events in `queue` are passed over."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while loop.time() < deadline:
        sender.publish(["did:x"], {"event": "ping", "from": sender.origin})
        try:
            while True:
                got = await asyncio.wait_for(queue.get(), 0.2)
                if got.get("from") == sender.origin:
                    return got
        except TimeoutError:
            continue
    raise AssertionError("the relay did not come back")


async def until(condition: Callable[[], bool], seconds: float = 15) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not condition():
        assert loop.time() < deadline, "not within the time"
        await asyncio.sleep(0.05)


async def test_a_redis_outage_costs_only_relayed_events_and_heals(
    hubs: Callable[[str], LiveHub], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(live, "BACKOFF_FIRST_SECONDS", 0.05)
    monkeypatch.setattr(live, "BACKOFF_MAX_SECONDS", 0.2)
    proxy = Proxy()
    through_proxy, direct = hubs(proxy.url), hubs(REDIS_URL)
    try:
        started = asyncio.get_running_loop().time()
        async with (
            through_proxy.subscribe("did:x") as cut_off,  # Redis is away: no long wait
            direct.subscribe("did:x") as on_direct,
        ):
            assert asyncio.get_running_loop().time() - started < live.READY_WAIT_SECONDS + 1
            # Ingestion goes on; local subscribers still get each event once.
            for seq in range(3):
                through_proxy.publish(["did:x"], {"event": "readings", "seq": seq})
                assert (await next_event(cut_off))["seq"] == seq
            await until(lambda: through_proxy.relay_dropped >= 1)
            await asyncio.sleep(0.2)
            assert on_direct.empty()
            for _round in range(2):  # Redis comes back, goes away again, comes back
                await proxy.up()
                assert (await until_relayed(through_proxy, on_direct))["event"] == "ping"
                assert (await until_relayed(direct, cut_off))["event"] == "ping"
                await proxy.down()
                dropped = through_proxy.relay_dropped
                through_proxy.publish(["did:x"], {"event": "readings", "seq": 9})
                while (await next_event(cut_off)).get("seq") != 9:  # past late pings
                    pass
                await until(lambda: through_proxy.relay_dropped > dropped)  # noqa: B023
    finally:
        await proxy.down()


async def test_a_relay_back_from_an_outage_tells_every_subscriber_to_resync(
    hubs: Callable[[str], LiveHub], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Events of other processes published while this relay was cut off are lost: when it
    subscribes again, each of its subscribers hears RESYNC once, and a hub that never lost
    Redis hears none from it."""
    monkeypatch.setattr(live, "BACKOFF_FIRST_SECONDS", 0.05)
    monkeypatch.setattr(live, "BACKOFF_MAX_SECONDS", 0.2)
    proxy = Proxy()
    cut, steady = hubs(proxy.url), hubs(REDIS_URL)
    try:
        async with (
            cut.subscribe("did:a") as a,
            cut.subscribe("did:b") as b,
            steady.subscribe("did:a") as on_steady,
        ):
            await proxy.up()
            assert await next_event(a) == RESYNC and await next_event(b) == RESYNC
            await nothing_more(a, b, on_steady)
    finally:
        await proxy.down()


async def test_a_publisher_that_dropped_events_tells_the_other_processes(
    hubs: Callable[[str], LiveHub], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(live, "BACKOFF_FIRST_SECONDS", 0.05)
    monkeypatch.setattr(live, "BACKOFF_MAX_SECONDS", 0.2)
    proxy = Proxy()
    dropping, other = hubs(proxy.url), hubs(REDIS_URL)
    try:
        async with other.subscribe("did:x") as x, other.subscribe("did:y") as y:
            dropping.publish(["did:x"], {"event": "readings", "seq": 1})
            await until(lambda: dropping.relay_dropped >= 1)
            await proxy.up()
            assert (await until_relayed(dropping, x))["event"] == "ping"
            assert await next_event(y) == RESYNC  # every topic: any of them may have missed
            seen = _drain(x)
            assert RESYNC not in seen  # until_relayed passed over it, before the ping
    finally:
        await proxy.down()


def _drain(queue: asyncio.Queue[dict[str, Any]]) -> list[dict[str, Any]]:
    return [queue.get_nowait() for _ in range(queue.qsize())]


async def test_a_redis_outage_is_logged_without_the_password(
    hubs: Callable[[str], LiveHub],
) -> None:
    password = "s3cret-" + secrets.token_hex(4)
    hub = hubs(f"redis://:{password}@127.0.0.1:{free_port()}/0")
    with capture_logs() as logs:
        async with hub.subscribe("did:x") as queue:
            hub.publish(["did:x"], {"event": "readings"})
            assert (await next_event(queue)) == {"event": "readings"}
            await until(lambda: hub.relay_dropped == 1 and len(logs) >= 2)
            assert queue.empty()
    messages = {entry["event"] for entry in logs if entry["log_level"] == "warning"}
    assert messages == {
        "live telemetry events not sent to Redis; retrying",
        "live telemetry relay lost Redis; retrying",
    }
    assert password not in repr(logs)


async def test_without_redis_the_hub_stays_in_process() -> None:
    hub = LiveHub()
    hub.start()
    assert not hub.relayed
    async with hub.subscribe("did:x") as queue:
        hub.publish(["did:x", "did:y"], {"event": "readings"})
        assert queue.get_nowait() == {"event": "readings"} and queue.empty()
    await hub.stop()
