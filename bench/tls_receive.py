#!/usr/bin/env python3
"""The broker's CPU cost to receive produce-sized requests, per MB: PLAINTEXT vs TLS.

    python bench/tls_receive.py              # 100 MB per case, about 10 s
    python bench/tls_receive.py --mb 20      # smaller

A uvloop server runs the broker's real connection code (KafkaConnection, and for TLS
the lent-buffer reader of broker/tls_reads.py) with a dispatcher that only answers
each request with a few bytes, so the figure is the transport's share alone. A
client process sends 256 KiB requests the way librdkafka does over TLS: one
TLS record per 1400 bytes. Over PLAINTEXT it sends each request in one call.

Cases: PLAINTEXT; TLS as the broker reads it (lent buffer, asyncio.BufferedProtocol);
TLS through data_received (what a plain asyncio.Protocol gets). The figure is the
server process's CPU seconds (getrusage) per MB, lowest of --repeat runs, so other
load on the machine matters less than for wall-clock throughput.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import socket
import ssl
import struct
import sys
import tempfile
from pathlib import Path

import uvloop

from slipstream.broker.server import KafkaConnection
from slipstream.broker.tls_reads import TlsBufferedReads
from slipstream.cli.certs import make_dev_certs

REQUEST_BYTES = 256 * 1024
RECORD_BYTES = 1400
ANSWER = struct.pack(">i", 4) + b"done"


class AnswerEach:
    """Stands in for the Dispatcher: a short answer per request, no work."""

    async def dispatch(self, frame: bytearray, peer: str) -> list[bytes]:
        return [ANSWER]


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def client(port: int, context: ssl.SSLContext | None, requests: int) -> None:
    request = struct.pack(">i", REQUEST_BYTES) + struct.pack(">h", 0) + b"x" * (REQUEST_BYTES - 2)
    raw = socket.create_connection(("127.0.0.1", port))
    sock = context.wrap_socket(raw) if context is not None else raw
    with sock:
        for _ in range(requests):
            if context is None:
                sock.sendall(request)
            else:
                for start in range(0, len(request), RECORD_BYTES):
                    sock.sendall(request[start : start + RECORD_BYTES])
        expected = len(ANSWER) * requests
        got = 0
        while got < expected:
            chunk = sock.recv(65536)
            if not chunk:
                raise SystemExit("server closed early")
            got += len(chunk)


def one_run(case: str, requests: int, server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext) -> float:
    """Server CPU seconds for ``requests`` requests of one case (the client is a child process)."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    child = os.fork()
    if child == 0:
        listener.close()
        try:
            client(port, None if case == "PLAINTEXT" else client_ctx, requests)
        finally:
            os._exit(0)
    answered = 0

    async def serve() -> float:
        loop = asyncio.get_running_loop()
        finished = loop.create_future()

        class Counting(AnswerEach):
            async def dispatch(self, frame: bytearray, peer: str) -> list[bytes]:
                nonlocal answered
                answered += 1
                if answered == requests and not finished.done():
                    finished.set_result(None)
                return [ANSWER]

        def new_protocol() -> asyncio.BaseProtocol:
            connection = KafkaConnection(Counting(), 1 << 30, set())  # type: ignore[arg-type]
            return TlsBufferedReads(connection) if case == "TLS, lent buffer" else connection

        server = await loop.create_server(new_protocol, sock=listener, ssl=None if case == "PLAINTEXT" else server_ctx)
        start = cpu_s()
        await finished
        spent = cpu_s() - start
        server.close()
        return spent

    spent = uvloop.run(serve())
    os.waitpid(child, 0)
    return spent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=100, help="MB sent per run (default 100)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per case, lowest kept (default 3)")
    args = parser.parse_args()
    requests = max(1, args.mb * 1_000_000 // REQUEST_BYTES)
    megabytes = requests * REQUEST_BYTES / 1_000_000
    with tempfile.TemporaryDirectory(prefix="slipstream-tls-receive-") as tmp:
        certs = Path(tmp)
        make_dev_certs(certs)
        server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_ctx.load_cert_chain(certs / "broker.pem", certs / "broker-key.pem")
        client_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        client_ctx.load_verify_locations(certs / "ca.pem")
        client_ctx.check_hostname = False
        cases = ("PLAINTEXT", "TLS, lent buffer", "TLS, data_received")
        best: dict[str, float] = {}
        for run in range(args.repeat):
            for case in cases:  # interleaved, so a busy spell on the machine hits every case
                ms_per_mb = one_run(case, requests, server_ctx, client_ctx) / megabytes * 1000
                print(f"[bench] run {run + 1}/{args.repeat} {case}: {ms_per_mb:.2f} CPU ms per MB", file=sys.stderr)
                best[case] = min(best.get(case, ms_per_mb), ms_per_mb)
    print(f"Broker-side receive cost, {megabytes:.0f} MB in 256 KiB requests, TLS records of {RECORD_BYTES} bytes; "
          f"lowest of {args.repeat}\n")
    print("| case | server CPU ms per MB |")
    print("|---|---:|")
    for case in cases:
        print(f"| {case} | {best[case]:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
