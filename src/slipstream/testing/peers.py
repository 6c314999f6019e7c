"""The rule for test peers (third-party clients, codecs, the Java driver, Spark): a test
whose peer is missing is skipped on a developer's machine and fails in CI (CI=true),
where `make test` installs every peer, so a broken install step cannot pass as skips."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

IN_CI = os.environ.get("CI", "").lower() == "true"


def missing_peer(reason: str) -> None:
    """Skip (locally) or fail (in CI) the calling test because a peer is absent."""
    if IN_CI:
        pytest.fail(f"{reason} (required in CI; `make test` installs it)")
    pytest.skip(reason)


def compiled_java_peer(
    source: Path, jar_names: Sequence[str], default_jar_dir: Path, build_prefix: str = ""
) -> tuple[str, str]:
    """``java`` and a classpath holding ``source`` compiled against the jars (kafka-clients
    and what it needs; ``SLIPSTREAM_JAVA_JARS`` or ``default_jar_dir``). It is compiled once
    per source and jar version, under the jar dir's ``build/``; a missing JDK or jar is a
    missing peer."""
    java, javac = shutil.which("java"), shutil.which("javac")
    if not java or not javac:
        missing_peer("java/javac not on PATH")
    assert java is not None and javac is not None
    jar_dir = Path(os.environ.get("SLIPSTREAM_JAVA_JARS", default_jar_dir))
    jars = [jar_dir / j for j in jar_names]
    missing = [str(j) for j in jars if not j.is_file()]
    if missing:
        missing_peer(f"kafka-clients jars missing ({', '.join(missing)}); run `make java-peer`")
    digest = hashlib.sha256(source.read_bytes())
    for j in jars:
        digest.update(f"{j.name}:{j.stat().st_size}".encode())
    build = jar_dir / "build" / (build_prefix + digest.hexdigest()[:16])
    classpath = os.pathsep.join([str(build), *map(str, jars)])
    if not (build / source.with_suffix(".class").name).is_file():
        tmp = build.with_name(build.name + f".tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        res = subprocess.run(
            [javac, "-nowarn", "-cp", os.pathsep.join(map(str, jars)), "-d", str(tmp), str(source)],
            capture_output=True, text=True, timeout=120,
        )
        if res.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            pytest.fail(f"javac failed:\n{res.stdout}\n{res.stderr}")
        try:
            tmp.rename(build)
        except OSError:  # another process won the race
            shutil.rmtree(tmp, ignore_errors=True)
    return java, classpath
