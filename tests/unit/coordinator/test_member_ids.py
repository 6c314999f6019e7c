"""Member ids the coordinator makes in consumer groups: Kafka's Uuid strings
(protocol/uuid_strings.py, shared with the cluster id)."""

from __future__ import annotations

import base64
import uuid

import pytest
from consumer_group_client import is_kafka_uuid_string

from slipstream.protocol import uuid_strings
from slipstream.protocol.uuid_strings import random_uuid_string


def test_a_random_uuid_string_is_kafkas_form() -> None:
    ids = {random_uuid_string() for _ in range(200)}
    assert len(ids) == 200
    assert all(is_kafka_uuid_string(i) for i in ids)


def test_a_uuid_whose_string_would_start_with_a_dash_is_drawn_again(monkeypatch: pytest.MonkeyPatch) -> None:
    dash_first = uuid.UUID(bytes=bytes([0xF8]) + bytes(5) + bytes([0x40]) + bytes(9))  # "-" is base64 62
    other = uuid.UUID("00112233-4455-4677-8899-aabbccddeeff")
    drawn = iter([dash_first, other])
    monkeypatch.setattr(uuid_strings.uuid, "uuid4", lambda: next(drawn))
    assert base64.urlsafe_b64encode(dash_first.bytes).decode().startswith("-")

    assert random_uuid_string() == "ABEiM0RVRneImaq7zN3u_w"
