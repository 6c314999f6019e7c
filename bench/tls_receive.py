#!/usr/bin/env python3
"""The broker's CPU cost to receive produce-sized requests, per MB: PLAINTEXT vs TLS.

    python bench/tls_receive.py              # 100 MB per case, about 20 s
    python bench/tls_receive.py --mb 20      # smaller
    python bench/tls_receive.py --quick      # smoke run (10 MB, one run per case)

A uvloop server (as ``slipstream serve`` runs) with the broker's real connection
code (KafkaConnection) and a dispatcher that only answers each request with a few
bytes, so the figure is the transport's share alone. A client process sends
256 KiB requests:

* PLAINTEXT: each request in one call;
* TLS, 1400-byte records: one TLS record per 1400 bytes, the way librdkafka writes
  a produce request over TLS (one ``SSL_write`` per buffer segment, about one per
  1 KiB message);
* TLS, 16 KiB records: full-size TLS records, for comparison.

The figure is the server process's CPU time (getrusage: user, system, total) per
MB, lowest of ``--repeat`` runs, so other load on the machine matters less than it
does for wall-clock throughput.
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
from harness import HOST, MB, log

from slipstream.broker.server import KafkaConnection
from slipstream.cli.certs import make_dev_certs

REQUEST_BYTES = 256 * 1024
CASES = {"PLAINTEXT": 0, "TLS, 1400-byte records": 1400, "TLS, 16 KiB records": 16 * 1024}
ANSWER = struct.pack(">i", 4) + b"done"


class AnswerEach:
    """Stands in for the Dispatcher: a short answer per request, no work."""

    async def dispatch(self, frame: bytearray, peer: str) -> list[bytes]:
        return [ANSWER]


def cpu_s() -> tuple[float, float]:
    """(user, system) CPU seconds of this process so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime, usage.ru_stime


def client(port: int, context: ssl.SSLContext | None, record_bytes: int, requests: int) -> None:
    request = struct.pack(">i", REQUEST_BYTES) + struct.pack(">h", 0) + b"x" * (REQUEST_BYTES - 2)
    raw = socket.create_connection((HOST, port))
    sock = context.wrap_socket(raw) if context is not None else raw
    with sock:
        for _ in range(requests):
            if context is None:
                sock.sendall(request)
            else:
                for start in range(0, len(request), record_bytes):
                    sock.sendall(request[start : start + record_bytes])
        expected = len(ANSWER) * requests
        got = 0
        while got < expected:
            chunk = sock.recv(65536)
            if not chunk:
                raise SystemExit("server closed early")
            got += len(chunk)


def one_run(
    record_bytes: int, requests: int, server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext
) -> tuple[float, float]:
    """Server (user, system) CPU seconds for ``requests`` requests; the client is a child process."""
    tls = record_bytes > 0
    listener = socket.create_server((HOST, 0))
    port = listener.getsockname()[1]
    child = os.fork()
    if child == 0:
        listener.close()
        try:
            client(port, client_ctx if tls else None, record_bytes, requests)
        finally:
            os._exit(0)
    answered = 0

    async def serve() -> tuple[float, float]:
        loop = asyncio.get_running_loop()
        finished = loop.create_future()

        class Counting(AnswerEach):
            async def dispatch(self, frame: bytearray, peer: str) -> list[bytes]:
                nonlocal answered
                answered += 1
                if answered == requests and not finished.done():
                    finished.set_result(None)
                return [ANSWER]

        def new_protocol() -> KafkaConnection:
            return KafkaConnection(Counting(), 1 << 30, set())  # type: ignore[arg-type]

        server = await loop.create_server(new_protocol, sock=listener, ssl=server_ctx if tls else None)
        user0, sys0 = cpu_s()
        await finished
        user1, sys1 = cpu_s()
        server.close()
        return user1 - user0, sys1 - sys0

    spent = uvloop.run(serve())
    os.waitpid(child, 0)
    return spent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke size")
    parser.add_argument("--mb", type=int, help="MB sent per run (default 100; quick 10)")
    parser.add_argument("--repeat", type=int, help="runs per case, lowest kept (default 3; quick 1)")
    args = parser.parse_args()
    mb = args.mb or (10 if args.quick else 100)
    repeat = args.repeat or (1 if args.quick else 3)
    requests = max(1, mb * MB // REQUEST_BYTES)
    megabytes = requests * REQUEST_BYTES / MB
    with tempfile.TemporaryDirectory(prefix="slipstream-tls-receive-") as tmp:
        certs = Path(tmp)
        make_dev_certs(certs)
        server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_ctx.load_cert_chain(certs / "broker.pem", certs / "broker-key.pem")
        client_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        client_ctx.load_verify_locations(certs / "ca.pem")
        client_ctx.check_hostname = False
        best: dict[str, tuple[float, float]] = {}
        for run in range(repeat):
            for case, record_bytes in CASES.items():  # interleaved: a busy spell on the machine hits every case
                user_s, sys_s = one_run(record_bytes, requests, server_ctx, client_ctx)
                user, system = user_s / megabytes * 1000, sys_s / megabytes * 1000
                log(f"run {run + 1}/{repeat} {case}: CPU ms per MB user {user:.2f} system {system:.2f}")
                if case not in best or user + system < sum(best[case]):
                    best[case] = (user, system)
    print(f"Broker-side receive cost, {megabytes:.0f} MB in 256 KiB requests; lowest of {repeat}\n")
    print("| client sends | server CPU ms per MB: user | system | total |")
    print("|---|---:|---:|---:|")
    for case, (user, system) in best.items():
        print(f"| {case} | {user:.2f} | {system:.2f} | {user + system:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
