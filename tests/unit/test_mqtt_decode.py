"""twinhub decodes a device's QoS 1 PUBLISH itself (telemetry/mqtt.py, OneConnection._packet):
what it hands on must be exactly what gmqtt's own decoding hands on, and whatever it does not
read plainly must go to gmqtt. gmqtt's decoder (the pinned library, run on the same packets)
is the reference."""

from __future__ import annotations

from typing import Any

import pytest

from twinhub.telemetry.mqtt import OneConnection, _decode_qos_1


def _utf8(data: bytes) -> bytes:
    return len(data).to_bytes(2, "big") + data


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        value, digit = value >> 7, value & 0x7F
        out.append(digit | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _publish(topic: bytes, mid: int, properties: bytes, payload: bytes) -> bytes:
    """A QoS 1 PUBLISH's variable header and payload (MQTT 5), as the broker sends it."""
    return _utf8(topic) + mid.to_bytes(2, "big") + _varint(len(properties)) + properties + payload


def _user(name: str, value: str) -> bytes:
    return b"\x26" + _utf8(name.encode()) + _utf8(value.encode())


PAYLOAD = b'{"readings":[{"seq":1,"time":"2026-11-28T10:00:00+00:00","values":{"energyKwh":0.1}}]}'
SIGNED = _user("key-id", "a1b2c3d4") + _user("signature", "ab" * 32)
CASES = {
    "signed": (0x32, _publish(b"t/did:x:1", 7, SIGNED, PAYLOAD)),
    # a device signature too: the properties' length takes two bytes (>= 128)
    "device-signed": (
        0x32,
        _publish(b"t/did:x:1", 65535, SIGNED + _user("device-signature", "z" * 88), PAYLOAD),
    ),
    "dup and retain": (0x3B, _publish(b"t/did:x:1", 1, SIGNED, PAYLOAD)),
    "no properties": (0x32, _publish(b"t/did:x:1", 2, b"", PAYLOAD)),
    "unicode": (0x32, _publish("t/dïd".encode(), 3, _user("név", "érték"), b"")),
    "topic not UTF-8": (0x32, _publish(b"t/\xff\xfe", 4, SIGNED, PAYLOAD)),
    "a name twice": (0x32, _publish(b"t/a", 5, _user("k", "1") + _user("k", "2"), PAYLOAD)),
}
# Properties the decoder leaves to gmqtt: a content type, a message expiry, a topic alias.
OTHERS = {
    "content type": b"\x03" + _utf8(b"application/json") + SIGNED,
    "message expiry": SIGNED + b"\x02" + (60).to_bytes(4, "big"),
    "topic alias": b"\x23" + (1).to_bytes(2, "big") + SIGNED,
}


def _taken(cmd: int, packet: bytes, ours: bool) -> list[tuple[Any, ...]]:
    taken: list[tuple[Any, ...]] = []
    client = OneConnection(
        "decode-test", take=lambda _c, *message: taken.append(message), receive_maximum=10
    )
    if ours:
        client._packet(cmd, packet)
    else:
        client._gmqtt_packet(cmd, packet)  # gmqtt's own decoding, as before
    return taken


@pytest.mark.parametrize("case", CASES, ids=str)
def test_a_device_message_is_taken_as_gmqtt_would_take_it(case: str) -> None:
    cmd, packet = CASES[case]
    assert _decode_qos_1(packet) is not None  # read here, not by gmqtt
    ours, theirs = _taken(cmd, packet, True), _taken(cmd, packet, False)
    assert len(theirs) == 1
    assert ours == theirs


@pytest.mark.parametrize("case", OTHERS, ids=str)
def test_other_properties_are_left_to_gmqtt(case: str) -> None:
    packet = _publish(b"t/did:x:1", 9, OTHERS[case], PAYLOAD)
    assert _decode_qos_1(packet) is None
    ours = _taken(0x32, packet, True)
    assert ours == _taken(0x32, packet, False)
    assert len(ours) == 1 and ours[0][0] == 9  # gmqtt took it: packet id, properties and all
    assert ours[0][3]["user_property"] == [("key-id", "a1b2c3d4"), ("signature", "ab" * 32)]


def test_a_packet_that_does_not_parse_is_left_to_gmqtt() -> None:
    whole = _publish(b"t/did:x:1", 9, SIGNED, PAYLOAD)
    properties_start = 2 + len(b"t/did:x:1") + 2
    for cut in (1, 3, properties_start + 5, properties_start + 40):
        assert _decode_qos_1(whole[:cut]) is None, cut
    assert _decode_qos_1(_publish(b"", 9, SIGNED, PAYLOAD)) is None  # empty topic: an alias
    assert _decode_qos_1(_publish(b"t/a", 9, _user("k", "v")[:-1] + b"\xff", PAYLOAD)) is None
