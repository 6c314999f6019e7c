#!/usr/bin/env python3
"""A bench-only Kafka stub that stores nothing: the ceiling row of broker_throughput.py.

    python bench/stub_broker.py --port 9092

It answers just what a confluent-kafka producer and an assigning consumer need
(ApiVersions, Metadata, CreateTopics, InitProducerId, Produce, ListOffsets,
FindCoordinator, Fetch), with no validation, no log and no durability. Produce only
counts records per partition (base offset and record count of each batch, plus the
first record's value size); Fetch answers with batches made up from a cached template
of the same record count and value size, its base offset patched (the CRC does not
cover it), so a consumer reads back exactly the offsets that were produced. Whatever
throughput a client reaches against it is about the most that client can do on this
machine, which is what the bench compares the brokers with.

Not a broker: one node, no groups, no sessions (Fetch always answers sessionless), and
values read back are zeros. Never use it for anything but the bench.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import struct
import uuid
from dataclasses import dataclass

from slipstream.broker.handlers import API_TABLE, load_handler
from slipstream.protocol import api, codec
from slipstream.protocol import primitives as p
from slipstream.protocol.apis.api_versions import ApiVersionsResponse, ApiVersionsResponseApiVersion
from slipstream.protocol.apis.create_topics import CreateTopicsResponse, CreateTopicsResponseTopic
from slipstream.protocol.apis.fetch import FetchResponse, FetchResponsePartition, FetchResponseTopic
from slipstream.protocol.apis.find_coordinator import (
    FindCoordinatorResponse,
    FindCoordinatorResponseCoordinator,
)
from slipstream.protocol.apis.init_producer_id import InitProducerIdResponse
from slipstream.protocol.apis.list_offsets import (
    ListOffsetsResponse,
    ListOffsetsResponsePartition,
    ListOffsetsResponseTopic,
)
from slipstream.protocol.apis.metadata import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from slipstream.protocol.apis.produce import (
    ProduceResponse,
    ProduceResponsePartition,
    ProduceResponseTopic,
)
from slipstream.protocol.file_region import FileRegion
from slipstream.protocol.record_batch import CRC_OFFSET, HEADER_SIZE, compute_crc, split_batches
from slipstream.protocol.records import ProducerRecord, build_batch
from slipstream.protocol.uniform_records import first_record_shape

# ApiVersions, Metadata, CreateTopics, InitProducerId, Produce, ListOffsets, FindCoordinator, Fetch
SERVED = (18, 3, 19, 22, 0, 2, 10, 1)
UNKNOWN_TOPIC_OR_PARTITION = 3
TOPIC_ALREADY_EXISTS = 36
_BASE_OFFSET = struct.Struct(">q")
_RECORD_COUNT = struct.Struct(">i")
_RECORD_COUNT_AT = 57
_LAST_OFFSET_DELTA_AT = 23
# Records per batch a Fetch answers with (any batching reads back the same offsets).
RECORDS_PER_BATCH = 2000
_SIZE = struct.Struct(">i")


@dataclass
class StubPartition:
    end: int = 0  # records produced so far
    value_size: int = 0  # of the first record produced


class Templates:
    """Batches of ``count`` records (null keys, zero-filled values of one size), made from
    one long batch per value size: the first ``count`` records of it under a header with
    the count, length and CRC rewritten."""

    def __init__(self) -> None:
        self._long: dict[int, tuple[bytes, list[int]]] = {}
        self._made: dict[tuple[int, int], bytes] = {}

    def batch(self, count: int, value_size: int) -> bytes:
        made = self._made.get((count, value_size))
        if made is None:
            long, ends = self._long_batch(value_size)
            out = bytearray(long[: ends[count - 1]])
            struct.pack_into(">i", out, 8, len(out) - 12)
            struct.pack_into(">i", out, _LAST_OFFSET_DELTA_AT, count - 1)
            struct.pack_into(">i", out, _RECORD_COUNT_AT, count)
            struct.pack_into(">I", out, CRC_OFFSET, compute_crc(bytes(out)))
            made = self._made[(count, value_size)] = bytes(out)
        return made

    def _long_batch(self, value_size: int) -> tuple[bytes, list[int]]:
        found = self._long.get(value_size)
        if found is None:
            long = build_batch([ProducerRecord(None, bytes(value_size))] * RECORDS_PER_BATCH)
            ends = []
            pos = HEADER_SIZE
            for _ in range(RECORDS_PER_BATCH):
                raw, shift = 0, 0
                while True:  # the record's length varint
                    byte = long[pos]
                    pos += 1
                    raw |= (byte & 0x7F) << shift
                    shift += 7
                    if byte < 0x80:
                        break
                pos += raw >> 1
                ends.append(pos)
            found = self._long[value_size] = (long, ends)
        return found


@dataclass
class StubTopic:
    name: str
    topic_id: uuid.UUID
    partitions: list[StubPartition]


class Stub:
    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.topics: dict[str, StubTopic] = {}
        self.by_id: dict[uuid.UUID, StubTopic] = {}
        self.next_producer_id = 1000
        self.templates = Templates()
        self.versions = [
            ApiVersionsResponseApiVersion(
                api_key=key,
                min_version=API_TABLE[key].min_version,
                max_version=API_TABLE[key].max_version,
            )
            for key in sorted(SERVED)
        ]
        self.specs = {key: load_handler(key).SPEC for key in SERVED}

    # ----------------------------------------------------------------- requests

    def answer(self, frame: bytes, *, fetch_may_wait: bool = False) -> bytes | float | None:
        """The response frame, None for acks=0, or (Fetch with nothing to return and
        ``fetch_may_wait``) the seconds to wait before asking again."""
        view = memoryview(frame)
        key, version, correlation_id = api.decode_request_header_prefix(view)
        spec = self.specs[key]
        _, pos = api.decode_request_header_rest(
            view, spec.request_header_version(version), key, version, correlation_id
        )
        request = spec.decode_request(view, pos, version)
        body: object
        if key == 1:
            body, size = self.fetch_response(request, version)
            max_wait_ms = request.max_wait_ms  # type: ignore[attr-defined]
            if fetch_may_wait and not size and max_wait_ms > 0:
                return float(max_wait_ms / 1000)
        else:
            body = getattr(self, f"on_{spec.name.lower()}")(request, version)
        if body is None:
            return None
        w = codec.Writer()
        w.buf += b"\0\0\0\0"
        api.encode_response_header(w.buf, correlation_id, spec.response_header_version(version))
        first = w.buf
        spec.encode_response(body, version, w)  # type: ignore[arg-type]
        parts = w.finish()
        p.INT32.pack_into(first, 0, sum(len(x) for x in parts) - 4)
        return w.getvalue()

    def on_apiversions(self, _request: object, _version: int) -> ApiVersionsResponse:
        return ApiVersionsResponse(error_code=0, api_keys=self.versions)

    def _metadata_topic(self, name: str) -> MetadataResponseTopic:
        topic = self.topics.get(name)
        if topic is None:
            return MetadataResponseTopic(error_code=UNKNOWN_TOPIC_OR_PARTITION, name=name)
        return MetadataResponseTopic(
            error_code=0,
            name=name,
            topic_id=topic.topic_id,
            partitions=[
                MetadataResponsePartition(
                    error_code=0, partition_index=i, leader_id=0, replica_nodes=[0], isr_nodes=[0]
                )
                for i in range(len(topic.partitions))
            ],
        )

    def on_metadata(self, request, _version: int) -> MetadataResponse:  # type: ignore[no-untyped-def]
        names = list(self.topics) if request.topics is None else [t.name for t in request.topics]
        return MetadataResponse(
            brokers=[MetadataResponseBroker(node_id=0, host=self.host, port=self.port)],
            cluster_id="stub",
            controller_id=0,
            topics=[self._metadata_topic(n) for n in names if n is not None],
        )

    def on_createtopics(self, request, _version: int) -> CreateTopicsResponse:  # type: ignore[no-untyped-def]
        out = []
        for t in request.topics:
            code = 0
            if t.name in self.topics:
                code = TOPIC_ALREADY_EXISTS
            else:
                topic = StubTopic(
                    t.name, uuid.uuid4(), [StubPartition() for _ in range(max(1, t.num_partitions))]
                )
                self.topics[t.name] = topic
                self.by_id[topic.topic_id] = topic
            out.append(
                CreateTopicsResponseTopic(
                    name=t.name,
                    topic_id=self.topics[t.name].topic_id,
                    error_code=code,
                    num_partitions=len(self.topics[t.name].partitions),
                    replication_factor=1,
                )
            )
        return CreateTopicsResponse(topics=out)

    def on_initproducerid(self, _request: object, _version: int) -> InitProducerIdResponse:
        self.next_producer_id += 1
        return InitProducerIdResponse(
            error_code=0, producer_id=self.next_producer_id, producer_epoch=0
        )

    def on_findcoordinator(self, request, version: int) -> FindCoordinatorResponse:  # type: ignore[no-untyped-def]
        if version >= 4:
            return FindCoordinatorResponse(
                coordinators=[
                    FindCoordinatorResponseCoordinator(
                        key=k, node_id=0, host=self.host, port=self.port, error_code=0
                    )
                    for k in request.coordinator_keys
                ]
            )
        return FindCoordinatorResponse(error_code=0, node_id=0, host=self.host, port=self.port)

    def _topic(
        self, name: str, topic_id: uuid.UUID, version: int, ids_from: int
    ) -> StubTopic | None:
        return self.by_id.get(topic_id) if version >= ids_from else self.topics.get(name)

    def on_produce(self, request, version: int) -> ProduceResponse | None:  # type: ignore[no-untyped-def]
        topics = []
        for data in request.topic_data:
            topic = self._topic(data.name, data.topic_id, version, 13)
            parts = []
            for part in data.partition_data:
                resp = ProduceResponsePartition(index=part.index, base_offset=-1)
                if (
                    topic is None
                    or not 0 <= part.index < len(topic.partitions)
                    or part.records is None
                ):
                    resp.error_code = UNKNOWN_TOPIC_OR_PARTITION
                else:
                    stub = topic.partitions[part.index]
                    resp.base_offset = stub.end
                    for batch in split_batches(part.records):
                        count = _RECORD_COUNT.unpack_from(batch, _RECORD_COUNT_AT)[0]
                        if not stub.value_size:
                            shape = first_record_shape(bytes(batch[HEADER_SIZE:]))
                            stub.value_size = max(shape[1], 0) if shape else 1
                        stub.end += count
                    resp.log_start_offset = 0
                parts.append(resp)
            topics.append(
                ProduceResponseTopic(
                    name=data.name, topic_id=data.topic_id, partition_responses=parts
                )
            )
        return None if request.acks == 0 else ProduceResponse(responses=topics)

    def on_listoffsets(self, request, _version: int) -> ListOffsetsResponse:  # type: ignore[no-untyped-def]
        out = []
        for t in request.topics:
            topic = self.topics.get(t.name)
            parts = []
            for part in t.partitions:
                if topic is None or not 0 <= part.partition_index < len(topic.partitions):
                    parts.append(
                        ListOffsetsResponsePartition(
                            partition_index=part.partition_index, error_code=3
                        )
                    )
                    continue
                end = topic.partitions[part.partition_index].end
                offset = 0 if part.timestamp == -2 else end
                parts.append(
                    ListOffsetsResponsePartition(
                        partition_index=part.partition_index,
                        error_code=0,
                        timestamp=-1,
                        offset=offset,
                    )
                )
            out.append(ListOffsetsResponseTopic(name=t.name, partitions=parts))
        return ListOffsetsResponse(topics=out)

    def _read(self, stub: StubPartition, offset: int, max_bytes: int) -> list[bytes | memoryview | FileRegion]:
        out: list[bytes | memoryview | FileRegion] = []
        size = 0
        while offset < stub.end:
            batch = self.templates.batch(min(RECORDS_PER_BATCH, stub.end - offset), stub.value_size)
            if out and size + len(batch) > max_bytes:
                break
            out.append(_BASE_OFFSET.pack(offset) + batch[8:])
            size += len(batch)
            offset += min(RECORDS_PER_BATCH, stub.end - offset)
        return out

    def fetch_response(self, request, version: int) -> tuple[FetchResponse, int]:  # type: ignore[no-untyped-def]
        total = 0
        topics = []
        for t in request.topics:
            topic = self._topic(t.topic, t.topic_id, version, 13)
            out = FetchResponseTopic(topic=t.topic, topic_id=t.topic_id)
            for part in t.partitions:
                resp = FetchResponsePartition(
                    partition_index=part.partition, high_watermark=-1, records=b""
                )
                out.partitions.append(resp)
                if topic is None or not 0 <= part.partition < len(topic.partitions):
                    resp.error_code = UNKNOWN_TOPIC_OR_PARTITION
                    continue
                stub = topic.partitions[part.partition]
                resp.high_watermark = resp.last_stable_offset = stub.end
                resp.log_start_offset = 0
                if part.fetch_offset < stub.end and total < request.max_bytes:
                    chunks = self._read(
                        stub,
                        part.fetch_offset,
                        min(part.partition_max_bytes, request.max_bytes - total),
                    )
                    resp.records = chunks
                    total += sum(len(c) for c in chunks)
            topics.append(out)
        return FetchResponse(error_code=0, session_id=0, responses=topics), total


class StubConnection(asyncio.Protocol):
    """Frames in, answers out, in order; an empty Fetch is answered after its max wait."""

    def __init__(self, stub: Stub) -> None:
        self.stub = stub
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None
        self.held: list[bytes] = []  # frames behind a waiting Fetch
        self.waiting = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while len(self.buf) >= 4:
            size = _SIZE.unpack_from(self.buf)[0]
            if len(self.buf) < 4 + size:
                break
            self.held.append(bytes(self.buf[4 : 4 + size]))
            del self.buf[: 4 + size]
        self.run()

    def run(self) -> None:
        out: list[bytes] = []
        while self.held and not self.waiting and self.transport is not None:
            frame = self.held.pop(0)
            answer = self.stub.answer(frame, fetch_may_wait=True)
            if isinstance(answer, float):
                self.held.insert(0, frame)
                self.waiting = True
                asyncio.get_running_loop().call_later(answer, self.wake, frame)
                break
            if answer is not None:
                out.append(answer)
        if out and self.transport is not None:
            self.transport.writelines(out)

    def wake(self, frame: bytes) -> None:
        # The wait is over: answer that Fetch with whatever there is now, then go on.
        self.waiting = False
        if self.held and self.held[0] is frame:
            self.held.pop(0)
            answer = self.stub.answer(frame)
            if (
                isinstance(answer, bytes)
                and self.transport is not None
                and not self.transport.is_closing()
            ):
                self.transport.write(answer)
        self.run()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None


async def serve(host: str, port: int) -> None:
    stub = Stub(host, port)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: StubConnection(stub), host, port)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.host, args.port))


if __name__ == "__main__":
    main()
