"""MQTT ingestion: an MQTT 5 shared subscription, acknowledged only after a message is stored.

Devices publish the HTTP body (`{"readings": [...]}`) with QoS 1 to `<prefix>/<twin DID>`.
Each message names its device token in the user property `key-id` and carries
`signature` = hex HMAC-SHA256 of the payload under the token's key (the SHA-256 of the
token's secret, see services/device_tokens.py), so a device cannot write another twin even
on a shared broker and no token travels through the broker. twinhub subscribes to
`$share/<group>/<prefix>/#`: several processes split the stream.

A message is acknowledged (PUBACK) only once its readings are committed, or once it is
judged bad (dropped, counted, listed for operators). While the database fails the message
is retried with backoff and stays unacknowledged; the broker sends unacknowledged messages
again after a reconnect, and seq dedupe makes the redelivery harmless. `Receive Maximum`
bounds the unacknowledged messages in flight, so a flood cannot grow memory.

paho-mqtt runs its network loop in its own thread (with reconnect and backoff); messages are
handed to the asyncio loop, and the PUBACK goes back through paho's thread-safe queue.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import os
import socket
from collections import Counter, deque
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from sqlalchemy.exc import (
    DataError,
    DBAPIError,
    IntegrityError,
    InterfaceError,
    OperationalError,
    ProgrammingError,
)

from twinhub.logging import get_logger
from twinhub.services.device_tokens import DeviceCredential, DeviceTokenService, sign
from twinhub.services.errors import ServiceError
from twinhub.settings import Settings
from twinhub.telemetry.schema import loads
from twinhub.telemetry.service import Prepared, TelemetryService, merge_by_device

log = get_logger(__name__)
KEY_ID = "key-id"
SIGNATURE = "signature"
RECEIVE_MAXIMUM = 1000  # unacknowledged messages the broker may send us at once
COALESCE = 500  # messages stored in one transaction at most
WORKERS = 2
T = TypeVar("T")
RETRYABLE = (OperationalError, InterfaceError, DBAPIError, OSError, TimeoutError)
NOT_RETRYABLE = (IntegrityError, DataError, ProgrammingError)
Opened = tuple[str, DeviceCredential, Any]  # a signed message's twin, credential and body


def device_properties(token: str, payload: bytes) -> Properties:
    """The MQTT 5 user properties a device sends with `payload` (devices and simulator)."""
    token_id = token.split("_")[1]
    properties = Properties(PacketTypes.PUBLISH)
    properties.UserProperty = [(KEY_ID, token_id), (SIGNATURE, sign(token, payload))]
    return properties


def topic_for(prefix: str, did: str) -> str:
    return f"{prefix}/{did}"


class MqttIngest:
    def __init__(
        self,
        settings: Settings,
        telemetry: TelemetryService,
        tokens: DeviceTokenService,
        client_id: str | None = None,
    ) -> None:
        self._settings = settings
        self._telemetry = telemetry
        self._tokens = tokens
        assert settings.mqtt_url is not None
        self._url = urlsplit(settings.mqtt_url.get_secret_value())
        self._prefix = settings.mqtt_topic_prefix.rstrip("/")
        self.client_id = (
            client_id or settings.mqtt_client_id or f"twinhub-{socket.gethostname()}-{os.getpid()}"
        )
        self.connected = False
        self.subscribed = False
        self.stored = 0  # messages whose readings were committed
        self.dropped = 0  # bad messages, acknowledged and counted
        self.retries = 0  # database failures retried
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: mqtt.Client | None = None
        self._queue: asyncio.Queue[mqtt.MQTTMessage] = asyncio.Queue()
        # paho's thread appends here and wakes the loop once per burst, not per message.
        self._inbox: deque[mqtt.MQTTMessage] = deque()
        self._wake_pending = False

    @property
    def status(self) -> str:
        return "connected" if self.connected else "disconnected"

    def as_record(self) -> dict[str, Any]:
        return {
            "state": self.status,
            "stored": self.stored,
            "dropped": self.dropped,
            "retries": self.retries,
        }

    async def run(self) -> None:
        """Connect (retrying with backoff while the broker is away) until cancelled."""
        self._loop = asyncio.get_running_loop()
        client = mqtt.Client(
            CallbackAPIVersion.VERSION2,
            client_id=self.client_id,
            protocol=mqtt.MQTTv5,
            manual_ack=True,
        )
        if self._url.username:
            client.username_pw_set(self._url.username, self._url.password)
        if self._url.scheme in ("mqtts", "ssl"):
            client.tls_set()
        client.reconnect_delay_set(1, max(1, int(self._settings.mqtt_reconnect_max_seconds)))
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_message = self._on_message
        client.on_subscribe = self._on_subscribe
        connect = Properties(PacketTypes.CONNECT)
        connect.ReceiveMaximum = RECEIVE_MAXIMUM
        connect.SessionExpiryInterval = 3600  # unacknowledged messages survive a restart
        port = self._url.port or (8883 if self._url.scheme in ("mqtts", "ssl") else 1883)
        client.connect_async(
            self._url.hostname or "127.0.0.1",
            port,
            keepalive=30,
            clean_start=False,
            properties=connect,
        )
        self._client = client
        client.loop_start()
        workers = [asyncio.create_task(self._work()) for _ in range(WORKERS)]
        try:
            await asyncio.gather(*workers)
        finally:
            for worker in workers:
                worker.cancel()
            self.connected = False  # a disconnect of our own is no warning
            client.disconnect()
            client.loop_stop()
            self.connected = False

    # -- paho callbacks (its network thread) ---------------------------------------------
    def _on_connect(
        self, client: mqtt.Client, _: Any, __: Any, reason: Any, ___: Any = None
    ) -> None:
        if reason.is_failure:
            log.warning("mqtt connect refused", reason=str(reason))
            return
        self.connected = True
        topic = f"$share/{self._settings.mqtt_shared_group}/{self._prefix}/#"
        client.subscribe(topic, qos=self._settings.mqtt_qos)
        log.info("mqtt connected", subscription=topic)

    def _on_subscribe(self, *_: Any) -> None:
        self.subscribed = True

    def _on_disconnect(self, _: mqtt.Client, __: Any, ___: Any, reason: Any, ____: Any) -> None:
        if self.connected:
            log.warning("mqtt disconnected; reconnecting with backoff", reason=str(reason))
        self.connected = self.subscribed = False

    def _on_message(self, client: mqtt.Client, _: Any, message: mqtt.MQTTMessage) -> None:
        assert self._loop is not None
        self._inbox.append(message)
        if not self._wake_pending:
            self._wake_pending = True
            self._loop.call_soon_threadsafe(self._take_inbox)

    def _take_inbox(self) -> None:
        """(the asyncio loop) Move what paho's thread received to the workers' queue. The
        flag drops first: a message appended after it gets a wake-up of its own."""
        self._wake_pending = False
        while self._inbox:
            self._queue.put_nowait(self._inbox.popleft())

    # -- handling (the asyncio loop) -----------------------------------------------------
    async def _work(self) -> None:
        """Take what has arrived (up to COALESCE messages), store it in one transaction,
        acknowledge it; forever."""
        while True:
            messages = [await self._queue.get()]
            while len(messages) < COALESCE and not self._queue.empty():
                messages.append(self._queue.get_nowait())
            await self._handle(messages)

    async def _handle(self, messages: list[mqtt.MQTTMessage]) -> None:
        opened: list[Opened] = []
        for message in messages:
            found = await self._retrying(lambda m=message: self._open(m))
            if found is not None:
                opened.append(found)
        counts = Counter(did for did, _, _ in opened)  # one rate-limit hit per device
        admitted = {did: await self._telemetry.admit(did, n) for did, n in counts.items()}
        prepared: list[Prepared] = []
        for did, credential, body in opened:
            found = await self._retrying(
                lambda d=did, c=credential, b=body: self._prepare(d, c, b, admitted[d])
            )
            if found is not None:
                prepared.append(found)
        if prepared:
            try:
                merged = merge_by_device(prepared)
                await self._retrying(lambda: self._telemetry.commit(merged))
                self.stored += len(prepared)
            except NOT_RETRYABLE:
                await self._one_by_one(prepared)
        for message in messages:
            if self._client is not None and message.qos > 0:
                self._client.ack(message.mid, message.qos)

    async def _one_by_one(self, prepared: list[Prepared]) -> None:
        """A group failed for a reason retrying cannot cure: store each alone, so only the
        culprit is dropped."""
        for one in prepared:
            try:
                await self._retrying(lambda o=one: self._telemetry.commit([o]))
                self.stored += 1
            except NOT_RETRYABLE as error:
                self._drop(one.did, f"cannot be stored: {type(error).__name__}")

    async def _retrying(self, work: Callable[[], Awaitable[T]]) -> T:
        """`work()` until the database answers: the messages stay unacknowledged meanwhile."""
        delay = 0.2
        while True:
            try:
                return await work()
            except NOT_RETRYABLE:
                raise
            except RETRYABLE as error:
                self.retries += 1
                log.warning("telemetry store failed; retrying", error=type(error).__name__)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _open(self, message: mqtt.MQTTMessage) -> Opened | None:
        """The message's twin, credential and parsed body once its signature holds, or None
        when it is dropped (counted and listed)."""
        topic = message.topic
        did = topic[len(self._prefix) + 1 :] if topic.startswith(self._prefix + "/") else ""
        properties = dict(getattr(message.properties, "UserProperty", None) or [])
        key_id, signature = properties.get(KEY_ID, ""), properties.get(SIGNATURE, "")
        if not did or not key_id or not signature:
            return self._drop(did or topic, "unsigned: key-id and signature user properties")
        credential = await self._tokens.by_id(key_id)
        if credential is None:
            return self._drop(did, "unknown or revoked device token")
        expected = hmac.new(credential.signing_key, message.payload, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, signature):
            return self._drop(did, "bad signature")
        if credential.domain != did:
            return self._drop(did, "a token of another device")
        try:
            body = loads(message.payload)
        except ValueError:
            return self._drop(did, "malformed JSON")
        return did, credential, body

    async def _prepare(
        self, did: str, credential: DeviceCredential, body: Any, admitted: bool
    ) -> Prepared | None:
        """The message's checked batch, or None when it is dropped (counted and listed)."""
        try:
            return await self._telemetry.prepare(
                did, credential, body, source="mqtt", admitted=admitted
            )
        except ServiceError as error:
            self.dropped += 1
            if error.code not in ("forbidden", "rate_limited"):  # the service listed those
                self._telemetry.reject("mqtt", did, error.message)
            return None

    def _drop(self, did: str, reason: str) -> None:
        self.dropped += 1
        self._telemetry.reject("mqtt", did, reason)
        return None
