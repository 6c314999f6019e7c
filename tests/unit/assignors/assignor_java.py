"""A client for ``java/AssignorOracle.java``: the Java client's assignors, one JVM,
one line per case (see the Java file for the line format)."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Sequence

from slipstream.client.assignors import Assignment, Subscription, TopicPartition
from slipstream.client.assignors.types import subscribed_partition_counts


def _tps(tps: Sequence[TopicPartition]) -> str:
    return ",".join(f"{t}/{p}" for t, p in tps)


def _parse_tps(s: str) -> list[TopicPartition]:
    if not s:
        return []
    out = []
    for item in s.split(","):
        t, _, p = item.rpartition("/")
        out.append((t, int(p)))
    return out


def _member(member_id: str, s: Subscription) -> str:
    if s.user_data is None:
        ud = ""
    elif s.user_data == b"":
        ud = "~"
    else:
        ud = s.user_data.hex()
    return "|".join(
        [member_id, s.group_instance_id or "", ",".join(s.topics), _tps(s.owned_partitions),
         str(s.generation_id), ud]
    )


class JavaAssignors:
    """A running AssignorOracle process."""

    def __init__(self, argv: list[str]) -> None:
        self._proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, encoding="utf-8",
        )
        self._lock = threading.Lock()

    def _ask(self, lines: list[str]) -> list[str]:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        with self._lock:
            self._proc.stdin.write("".join(line + "\n" for line in lines))
            self._proc.stdin.flush()
            answers = [self._proc.stdout.readline().rstrip("\n") for _ in lines]
        for q, a in zip(lines, answers, strict=True):
            if a.startswith("ERROR"):
                raise AssertionError(f"Java oracle failed on {q!r}: {a}")
        return answers

    def assign_many(
        self, cases: Sequence[tuple[str, dict[str, int], dict[str, Subscription]]]
    ) -> list[Assignment]:
        lines = []
        for name, counts, subs in cases:
            # the Java leader passes only subscribed topics that have partitions
            live = subscribed_partition_counts(counts, subs)
            fields = [name, ",".join(f"{t}:{n}" for t, n in live.items())]
            fields += [_member(m, s) for m, s in subs.items()]
            lines.append("ASSIGN " + "\t".join(fields))
        out: list[Assignment] = []
        for answer in self._ask(lines):
            result: Assignment = {}
            for entry in answer.split(";") if answer else []:
                m, _, tps = entry.partition("=")
                result[m] = sorted(_parse_tps(tps))
            out.append(result)
        return out

    def assign(self, name: str, counts: dict[str, int], subs: dict[str, Subscription]) -> Assignment:
        return self.assign_many([(name, counts, subs)])[0]

    def user_data(self, name: str, owned: Sequence[TopicPartition], generation: int) -> bytes | None:
        (answer,) = self._ask([f"USERDATA {name}\t{generation}\t{_tps(owned)}"])
        return None if answer == "null" else bytes.fromhex(answer)

    def member_data(self, name: str, sub: Subscription) -> tuple[list[TopicPartition], int | None]:
        """(partitions, generation or None) as the Java leader reads this member."""
        (answer,) = self._ask([f"MEMBERDATA {name}\t{_member('m', sub)}"])
        tps, _, gen = answer.rpartition("|")
        return _parse_tps(tps), None if gen == "none" else int(gen)

    def close(self) -> None:
        if self._proc.stdin:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


