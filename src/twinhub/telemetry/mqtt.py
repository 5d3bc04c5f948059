"""MQTT ingestion: an MQTT 5 shared subscription, acknowledged only after a message is stored.

Devices publish the HTTP body (`{"readings": [...]}`) with QoS 1 to `<prefix>/<twin DID>`.
Each message names its device token in the user property `key-id` and carries
`signature` = hex HMAC-SHA256 of the payload under the token's key (the SHA-256 of the
token's secret, see services/device_tokens.py), so a device cannot write another twin even
on a shared broker and no token travels through the broker. The message and its HMAC are
kept as the readings' receipt; a device with an enrolled Ed25519 key adds
`device-signature` (security/device_signatures.py), checked by the service. twinhub subscribes to
`$share/<group>/<prefix>/#`: several processes split the stream.

A message is acknowledged (PUBACK) only once its readings are committed, or once it is
judged bad (dropped, counted, listed for operators). While the database fails the message
is retried with backoff and stays unacknowledged; the broker sends unacknowledged messages
again after a reconnect, and seq dedupe makes the redelivery harmless. `Receive Maximum`
bounds the unacknowledged messages in flight, so a flood cannot grow memory.

gmqtt runs the connection on the asyncio loop itself (no thread). A device's QoS 1 message is
decoded here in one pass (OneConnection._packet: what gmqtt's decoder gives, for less than
half its cost; any other packet is gmqtt's) and joins the group being filled (no task per
message), and once the group's
transaction is committed its PUBACKs go out in one write on the connection they came on (a
worker that finds fewer than LINGER_BELOW messages gives the group LINGER_SECONDS more to
fill: a transaction costs about as much for few messages as for many). Other QoS take
gmqtt's own path: `on_message` is a coroutine that waits for its group, and gmqtt answers
when it returns. The HMAC's key pads are computed once per device token, not per message.
A lost connection is replaced by a fresh client after a backoff, so no acknowledgement
meant for the old connection can reach the new one (packet ids are per connection); the
broker sends what was left unacknowledged again.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar
from urllib.parse import urlsplit

import gmqtt
from gmqtt.mqtt.constants import MQTTv50, PubAckReasonCode
from gmqtt.mqtt.handler import MQTTConnectError

from twinhub.db.failures import DATABASE_ERRORS, RETRYABLE, classify
from twinhub.kernel.errors import ServiceError
from twinhub.logging import get_logger
from twinhub.mrv.telemetry_schema import loads
from twinhub.services.device_tokens import DeviceCredential, DeviceTokenService, sign
from twinhub.settings import TelemetrySettings
from twinhub.telemetry.service import Arrival, Prepared, TelemetryService, merge_by_device

log = get_logger(__name__)
KEY_ID = "key-id"
SIGNATURE = "signature"
DEVICE_SIGNATURE = "device-signature"  # Ed25519 over the JCS batch, from a device with a key
RECEIVE_MAXIMUM = 1000  # unacknowledged messages the broker may send us at once
WORKERS = 2
LINGER_BELOW = 100  # a group smaller than this waits LINGER_SECONDS for more messages
LINGER_SECONDS = 0.002
CONNECT_TIMEOUT_SECONDS = 10.0
SESSION_EXPIRY_SECONDS = 3600  # unacknowledged messages survive a restart
PUBACK = b"\x40\x02"  # PUBACK, remaining length 2 (MQTT 5: reason Success, no properties)
HMAC_BLOCK = 64  # SHA-256's block: the HMAC key pads' length
USER_PROPERTY = 0x26  # MQTT 5 property identifier
T = TypeVar("T")
# A signed message's twin, credential, body and arrival (bytes and signatures).
Opened = tuple[str, DeviceCredential, Any, Arrival]
Message = tuple[
    Any, bytes, dict[str, Any]
]  # topic (str, or bytes when not UTF-8), payload, properties


def device_properties(
    token: str, payload: bytes, device_signature: str | None = None
) -> list[tuple[str, str]]:
    """The MQTT 5 user properties a device sends with `payload` (devices and simulator);
    `device_signature`: its Ed25519 signature of the batch, when it has an enrolled key
    (security/device_signatures.py)."""
    token_id = token.split("_")[1]
    properties = [(KEY_ID, token_id), (SIGNATURE, sign(token, payload))]
    if device_signature is not None:
        properties.append((DEVICE_SIGNATURE, device_signature))
    return properties


def topic_for(prefix: str, did: str) -> str:
    return f"{prefix}/{did}"


class _Taker(Protocol):
    def __call__(
        self, client: OneConnection, mid: int, topic: Any, payload: bytes, properties: Any
    ) -> None: ...


class OneConnection(gmqtt.Client):  # type: ignore[misc]
    """A gmqtt client for one connection: MqttIngest reconnects with backoff and a fresh
    client, so gmqtt's own reconnect (fixed delay, same client) stays off. Its QoS 1
    messages go to `take` as gmqtt decodes them, unacknowledged: gmqtt would run a task per
    message and write each PUBACK alone, a third of a bare consumer's CPU per message."""

    def __init__(self, *args: Any, take: _Taker, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._take = take
        handler = self._package_handler
        # gmqtt 0.8 (pinned) dispatches a QoS 1 PUBLISH to this handler method; its packets
        # reach `_handle_packet` first (the handler's __call__), where _packet takes them.
        handler._handle_qos_1_publish_packet = self._qos_1
        self._gmqtt_packet = handler._handle_packet
        handler._handle_packet = self._packet

    def _qos_1(self, mid: int, payload: bytes, topic: Any, properties: Any) -> None:
        self._take(self, mid, topic, payload, properties)

    def _packet(self, cmd: int, packet: bytes) -> None:
        """A QoS 1 PUBLISH whose only properties are user properties (a device's message)
        decoded here, in one pass over the bytes, and taken: what gmqtt's own decoding
        gives, for less than half its cost (no struct format built per packet, no property
        objects, no debug line). Any other packet, or one this does not read plainly (a
        topic alias, another property, a topic that is empty), goes to gmqtt as before."""
        # PUBLISH at QoS 1 (DUP and RETAIN either way) on an MQTT 5 connection
        if cmd & 0xF6 == 0x32 and self._connection_state.protocol_version >= MQTTv50:
            taken = _decode_qos_1(packet)
            if taken is not None:
                self._package_handler._last_msg_in = time.monotonic()
                mid, topic, payload, users = taken
                properties: dict[str, Any] = {"dup": (cmd & 0x08) >> 3, "retain": cmd & 0x01}
                if users:
                    properties["user_property"] = users
                self._take(self, mid, topic, payload, properties)
                return
        self._gmqtt_packet(cmd, packet)

    def acknowledge(self, mids: list[int]) -> None:
        """PUBACKs for `mids`, in one write, when this connection is still open; a closed
        one's messages come again from the broker on the next connection."""
        connection = self._connection
        if connection is None or connection.is_closing():
            return
        connection.send_package(b"".join([PUBACK + mid.to_bytes(2, "big") for mid in mids]))

    async def reconnect(self, delay: bool = False) -> None:
        return None


def _decode_qos_1(
    packet: bytes,
) -> tuple[int, Any, bytes, list[tuple[str, str]]] | None:
    """A QoS 1 PUBLISH's packet id, topic (str; the bytes when not UTF-8, as gmqtt gives
    it), payload and user properties (MQTT 5: topic, packet id, properties, payload); None
    when it holds anything else or does not parse, for gmqtt to handle as it always has."""
    try:
        end = 2 + int.from_bytes(packet[0:2], "big")
        raw_topic = packet[2:end]
        if not raw_topic or len(raw_topic) != end - 2:
            return None
        mid = int.from_bytes(packet[end : end + 2], "big")
        at = end + 2
        length = shift = 0
        while True:  # the properties' length, a variable byte integer
            byte = packet[at]
            at += 1
            length |= (byte & 0x7F) << shift
            if not byte & 0x80:
                break
            shift += 7
            if shift > 21:
                return None
        stop = at + length
        if stop > len(packet):
            return None
        users: list[tuple[str, str]] = []
        while at < stop:
            if packet[at] != USER_PROPERTY:
                return None
            size = int.from_bytes(packet[at + 1 : at + 3], "big")
            name_end = at + 3 + size
            size = int.from_bytes(packet[name_end : name_end + 2], "big")
            value_end = name_end + 2 + size
            if value_end > stop:
                return None
            users.append(
                (
                    packet[at + 3 : name_end].decode("utf-8"),
                    packet[name_end + 2 : value_end].decode("utf-8"),
                )
            )
            at = value_end
    except (IndexError, UnicodeDecodeError):
        return None
    try:
        topic: Any = raw_topic.decode("utf-8")
    except UnicodeDecodeError:
        topic = raw_topic
    return mid, topic, packet[stop:], users


class _Macs:
    """HMAC-SHA256 under device tokens' keys with each key's pads hashed once (RFC 2104:
    the inner and outer hashes start from the padded key; copying them is a third of
    `hmac.new`'s cost per message)."""

    def __init__(self) -> None:
        self._pads: dict[bytes, tuple[Any, Any]] = {}

    def hexdigest(self, key: bytes, payload: bytes) -> str:
        pads = self._pads.get(key)
        if pads is None:
            block = hashlib.sha256(key).digest() if len(key) > HMAC_BLOCK else key
            block = block.ljust(HMAC_BLOCK, b"\0")
            pads = (
                hashlib.sha256(bytes(b ^ 0x36 for b in block)),
                hashlib.sha256(bytes(b ^ 0x5C for b in block)),
            )
            if len(self._pads) > 100_000:
                self._pads.clear()
            self._pads[key] = pads
        inner = pads[0].copy()
        inner.update(payload)
        outer = pads[1].copy()
        outer.update(inner.digest())
        return outer.hexdigest()


class _ClosedSocketAcks(logging.Filter):
    """Acknowledgements of a connection already lost go nowhere by design (the broker sends
    those messages again): not a warning worth a line per message."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "WRITE TO CLOSED SOCKET" not in record.getMessage()


logging.getLogger("gmqtt.mqtt.protocol").addFilter(_ClosedSocketAcks())


class _Group:
    """Messages stored in one transaction: the QoS 1 ones' PUBACKs (`acks`: connection and
    packet id) go out once it is stored; other messages' coroutines wait on `done`."""

    __slots__ = ("acks", "done", "messages")

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.acks: list[tuple[OneConnection, int]] = []
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def acknowledge(self) -> None:
        """The PUBACKs of the group's QoS 1 messages, one write per connection."""
        by_client: dict[OneConnection, list[int]] = {}
        for client, mid in self.acks:
            by_client.setdefault(client, []).append(mid)
        for client, mids in by_client.items():
            client.acknowledge(mids)


class MqttIngest:
    def __init__(
        self,
        settings: TelemetrySettings,
        telemetry: TelemetryService,
        tokens: DeviceTokenService,
        client_id: str,
        persistent: bool = True,
    ) -> None:
        """`client_id`: this subscriber's broker session (telemetry/bootstrap.py derives a
        stable one per deployment and worker). `persistent`: keep the session while away,
        so a restart resumes it; a one-off subscriber (the simulator) makes a clean one that
        ends with its connection and leaves nothing subscribed to the group."""
        self._settings = settings
        self._telemetry = telemetry
        self._tokens = tokens
        assert settings.mqtt_url is not None
        self._url = urlsplit(settings.mqtt_url.get_secret_value())
        self._prefix = settings.mqtt_topic_prefix.rstrip("/")
        self.client_id = client_id
        self._persistent = persistent
        self.connected = False
        self.subscribed = False
        self.stored = 0  # messages whose readings were committed
        self.dropped = 0  # bad messages, acknowledged and counted
        self.retries = 0  # database failures retried
        self.connections = 0  # connections made (the first, then each reconnect)
        self.groups = 0  # groups handled (a transaction each, at most): messages / groups
        self._client: gmqtt.Client | None = None
        self._filling: _Group | None = None  # messages arriving, not yet taken by a worker
        self._open: set[_Group] = set()  # taken, not yet stored
        self._ready = asyncio.Event()
        self._macs = _Macs()

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
        """Stay connected (reconnecting with backoff while the broker is away) and store
        what arrives, until cancelled."""
        self._filling = _Group()
        workers = [asyncio.create_task(self._work()) for _ in range(WORKERS)]
        delay = 1.0
        ceiling = max(1.0, self._settings.mqtt_reconnect_max_seconds)
        try:
            while True:
                lost = asyncio.Event()
                client = self._new_client(lost)
                self._client = client
                try:
                    await asyncio.wait_for(self._connect(client), CONNECT_TIMEOUT_SECONDS)
                except (OSError, TimeoutError, MQTTConnectError) as error:
                    log.warning("mqtt connect failed; retrying", error=str(error), delay=delay)
                    await _close(client)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, ceiling)
                    continue
                self.connected = True
                self.connections += 1
                delay = 1.0
                topic = f"$share/{self._settings.mqtt_shared_group}/{self._prefix}/#"
                client.subscribe(topic, qos=self._settings.mqtt_qos)
                log.info("mqtt connected", subscription=topic)
                await lost.wait()
                self.connected = self.subscribed = False
                log.warning("mqtt disconnected; reconnecting with backoff", delay=delay)
                await _close(client)
                await asyncio.sleep(delay)
                delay = min(delay * 2, ceiling)
        finally:
            for worker in workers:
                worker.cancel()
            self.connected = self.subscribed = False  # a disconnect of our own is no warning
            if self._client is not None:
                await _close(self._client)
            # Closed: what was not stored goes unacknowledged, and the broker sends it again.
            for group in [*self._open, self._filling]:
                if group is not None and not group.done.done():
                    group.done.set_result(None)

    def _new_client(self, lost: asyncio.Event) -> gmqtt.Client:
        client = OneConnection(
            self.client_id,
            take=self._take,
            clean_session=not self._persistent,
            optimistic_acknowledgement=False,  # PUBACK once on_message has returned
            receive_maximum=RECEIVE_MAXIMUM,
            session_expiry_interval=SESSION_EXPIRY_SECONDS if self._persistent else 0,
        )
        if self._url.username:
            client.set_auth_credentials(self._url.username, self._url.password)
        client.on_message = self._on_message
        client.on_subscribe = self._on_subscribe
        client.on_disconnect = lambda _client, _packet, _exc=None: lost.set()
        return client

    async def _connect(self, client: gmqtt.Client) -> None:
        tls = self._url.scheme in ("mqtts", "ssl")
        port = self._url.port or (8883 if tls else 1883)
        await client.connect(
            self._url.hostname or "127.0.0.1",
            port,
            ssl=tls,
            # gmqtt applies Server Keep Alive
            keepalive=self._settings.mqtt_keepalive_seconds,
        )

    def _on_subscribe(self, _client: gmqtt.Client, _mid: int, granted: Any, _p: Any) -> None:
        if all(code < 0x80 for code in granted):
            self.subscribed = True
        else:
            log.warning("mqtt subscription refused", codes=list(granted))

    def _take(
        self, client: OneConnection, mid: int, topic: Any, payload: bytes, properties: Any
    ) -> None:
        """A QoS 1 message joins the group being filled; its PUBACK follows that group's
        commit (or its judgement as bad)."""
        group = self._filling
        assert group is not None
        group.messages.append((topic, payload, properties))
        group.acks.append((client, mid))
        if len(group.messages) == 1:
            self._ready.set()

    async def _on_message(
        self, _client: gmqtt.Client, topic: Any, payload: bytes, _qos: int, properties: Any
    ) -> int:
        """Join the group being filled and wait until it is stored or judged: gmqtt sends
        the PUBACK when this returns."""
        group = self._filling
        assert group is not None
        group.messages.append((topic, payload, properties))
        if len(group.messages) == 1:
            self._ready.set()
        await group.done
        return int(PubAckReasonCode.SUCCESS)

    # -- handling (the asyncio loop) -----------------------------------------------------
    async def _work(self) -> None:
        """Take what has arrived, store it in one transaction, release its
        acknowledgements; forever. Receive Maximum bounds a group's size."""
        while True:
            await self._ready.wait()
            self._ready.clear()
            group = self._filling
            if group is not None and 0 < len(group.messages) < LINGER_BELOW:
                # A group costs about as much to write for one message as for a hundred
                # (one transaction, a few statements): a moment more lets the messages
                # already on their way join it, when a flood arrives faster than groups
                # are written (SQLite's quick commits took groups of 5 to 50 messages).
                await self._linger()
                group = self._filling
            if group is None or not group.messages:
                continue
            self._filling = _Group()
            self.groups += 1
            self._open.add(group)
            while True:
                try:
                    await self._handle(group.messages)
                    break
                except Exception:  # a bug, not bad input: keep the group unacknowledged
                    log.exception("mqtt group failed; retrying")
                    await asyncio.sleep(1.0)
            self._open.discard(group)
            group.acknowledge()
            group.done.set_result(None)

    async def _linger(self) -> None:
        await asyncio.sleep(LINGER_SECONDS)

    async def _handle(self, messages: list[Message]) -> None:
        """Check, prepare and store a group: credentials looked up once per token and
        readings checked once per device (not per message), one transaction for all."""
        users = [_user(properties) for _, _, properties in messages]
        key_ids = {user.get(KEY_ID, "") for user in users}
        credentials = await self._retrying(lambda: self._credentials(key_ids))
        by_device: dict[tuple[str, str], tuple[DeviceCredential, list[Any], list[Arrival]]] = {}
        for message, user in zip(messages, users, strict=True):
            found = self._check(message, user, credentials)
            if found is not None:
                did, credential, body, arrival = found
                _, bodies, arrivals = by_device.setdefault(
                    (did, credential.token_id), (credential, [], [])
                )
                bodies.append(body)
                arrivals.append(arrival)
        prepared: list[Prepared] = []
        for (did, _), (credential, bodies, arrivals) in by_device.items():
            try:
                results = await self._retrying(
                    lambda d=did, c=credential, b=bodies, a=arrivals: self._telemetry.prepare_many(
                        d, c, b, "mqtt", a
                    )
                )
            except ServiceError as error:  # all of the device's messages refused alike
                results = [error] * len(bodies)
            except DATABASE_ERRORS as error:  # not retryable (_retrying): the device's own
                for _ in bodies:
                    self._drop(did, _unstorable(error))
                continue
            for result in results:
                if isinstance(result, Prepared):
                    prepared.append(result)
                else:
                    self._refused(did, result)
        if prepared:
            try:
                merged = merge_by_device(prepared)
                await self._retrying(lambda: self._telemetry.commit(merged))
                self.stored += len(prepared)
            except DATABASE_ERRORS:  # not retryable (_retrying): find the culprit
                await self._one_by_one(prepared)

    async def _credentials(self, key_ids: set[str]) -> dict[str, DeviceCredential | None]:
        """The group's device tokens: cached ones as they are, the rest in one query."""
        return await self._tokens.by_ids({key_id for key_id in key_ids if key_id})

    async def _one_by_one(self, prepared: list[Prepared]) -> None:
        """A group failed for a reason retrying cannot cure: store each alone, so only the
        culprit is dropped."""
        for one in prepared:
            try:
                await self._retrying(lambda o=one: self._telemetry.commit([o]))
                self.stored += 1
            except DATABASE_ERRORS as error:
                self._drop(one.did, _unstorable(error))

    async def _retrying(self, work: Callable[[], Awaitable[T]]) -> T:
        """`work()` until the database answers: the messages stay unacknowledged meanwhile.
        A failure retrying cannot cure (db/failures.py: a value the database refuses, a
        constraint, a fault) is raised at once."""
        delay = 0.2
        while True:
            try:
                return await work()
            except DATABASE_ERRORS as error:
                if classify(error) not in RETRYABLE:
                    raise
                self.retries += 1
                log.warning("telemetry store failed; retrying", error=type(error).__name__)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    def _check(
        self,
        message: Message,
        user: dict[str, str],
        credentials: dict[str, DeviceCredential | None],
    ) -> Opened | None:
        """The message's twin, credential and parsed body once its signature holds, or None
        when it is dropped (counted and listed). `user`: its user properties."""
        topic, payload, _ = message
        if not isinstance(topic, str):  # gmqtt hands over a topic that is not UTF-8 as bytes
            return self._drop(repr(topic)[:200], "topic is not UTF-8")
        did = topic[len(self._prefix) + 1 :] if topic.startswith(self._prefix + "/") else ""
        key_id, signature = user.get(KEY_ID, ""), user.get(SIGNATURE, "")
        if not did or not key_id or not signature:
            return self._drop(did or topic, "unsigned: key-id and signature user properties")
        credential = credentials.get(key_id)
        if credential is None:
            return self._drop(did, "unknown or revoked device token")
        expected = self._macs.hexdigest(credential.signing_key, payload)
        if not hmac.compare_digest(expected, signature):
            return self._drop(did, "bad signature")
        if credential.domain != did:
            return self._drop(did, "a token of another device")
        try:
            body = loads(payload)
        except ValueError:
            return self._drop(did, "malformed JSON")
        # Kept with the readings: the message as it arrived, its HMAC, and the device's own
        # Ed25519 signature when it has a key (checked by the service).
        hmac_record = {"deviceToken": key_id, "value": signature}
        arrival = Arrival(payload, user.get(DEVICE_SIGNATURE), hmac_record)
        return did, credential, body, arrival

    def _refused(self, did: str, error: ServiceError) -> None:
        """A message the service refused: counted; listed unless the service listed it."""
        self.dropped += 1
        if error.code not in ("forbidden", "rate_limited"):
            self._telemetry.reject("mqtt", did, error.message)

    def _drop(self, did: str, reason: str) -> None:
        self.dropped += 1
        self._telemetry.reject("mqtt", did, reason)
        return None


def _user(properties: dict[str, Any]) -> dict[str, str]:
    """A message's user properties (the first of a name that comes twice)."""
    user: dict[str, str] = {}
    for name, value in properties.get("user_property") or ():
        user.setdefault(name, value)
    return user


async def _close(client: gmqtt.Client) -> None:
    """Disconnect (sends DISCONNECT when the connection is up, closes the socket)."""
    try:
        await client.disconnect()
    except Exception as error:  # closing a connection already gone
        log.debug("mqtt close", error=type(error).__name__)


def _unstorable(error: BaseException) -> str:
    """Why a message is dropped after the database refused it (never an outage's reason:
    those are retried)."""
    return f"cannot be stored ({classify(error) or 'fault'}: {type(error).__name__})"
