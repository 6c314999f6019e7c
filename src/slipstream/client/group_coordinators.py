"""Which broker coordinates each group, and group requests sent to it with retries.

FindCoordinator answers are cached per group; NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS and lost connections make the
group's coordinator be looked up again, after a bounded backoff. The admin's group
and committed-offset operations all go through :meth:`GroupCoordinators.per_group`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from ..protocol.apis.find_coordinator import SPEC as FIND_COORDINATOR
from ..protocol.apis.find_coordinator import FindCoordinatorRequest
from ..protocol.errors import ErrorCode, KafkaError, info
from .cluster import BrokerNode, Cluster
from .connection import BrokerConnection, ConnectionClosed
from .retry import DeadlineBackoff

# Errors that mean "ask (another) coordinator again after a pause".
COORDINATOR_RETRIABLE = frozenset(
    {
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NETWORK_EXCEPTION,
    }
)
_FIND_RETRIABLE = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})
KEY_TYPE_GROUP = 0

GroupAnswers = dict[str, tuple[int, Any]]
"""What a per-group request answers: group id -> (error code, the group's part of the response)."""
SendToCoordinator = Callable[[BrokerConnection, list[str]], Awaitable[GroupAnswers]]


def group_error(group_id: str, code: int, what: str) -> KafkaError:
    """The error to raise for a failed group request, with a hint at the usual cause."""
    hints = {
        ErrorCode.NON_EMPTY_GROUP: "the group still has active members",
        ErrorCode.GROUP_ID_NOT_FOUND: "the group does not exist",
        ErrorCode.UNKNOWN_MEMBER_ID: (
            "the group has active members; committed offsets can only be changed while it is Empty"
        ),
        ErrorCode.ILLEGAL_GENERATION: (
            "the group has active members; committed offsets can only be changed while it is Empty"
        ),
        ErrorCode.REBALANCE_IN_PROGRESS: "the group is rebalancing",
        ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC: "the live group still subscribes to the topic",
        ErrorCode.COORDINATOR_NOT_AVAILABLE: "no coordinator answered in time",
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: "the coordinator is still loading",
    }
    detail = hints.get(code) or info(code).message
    return KafkaError(code, f"{what} for group {group_id!r} failed: {detail}")


class GroupCoordinators:
    """The coordinators of groups, looked up and cached, and requests routed to them.

    ``new_backoff`` makes the backoff of one retry loop (the admin's settings, read at
    each call so a test may change them).
    """

    def __init__(self, cluster: Cluster, new_backoff: Callable[[], DeadlineBackoff]) -> None:
        self.cluster = cluster
        self.new_backoff = new_backoff
        self._cache: dict[str, BrokerNode] = {}

    def cached(self, group_id: str) -> BrokerNode | None:
        """The coordinator last found for ``group_id``, if it is still believed."""
        return self._cache.get(group_id)

    def forget(self, group_id: str) -> None:
        self._cache.pop(group_id, None)

    async def find(self, group_ids: Iterable[str]) -> dict[str, BrokerNode]:
        """Coordinators of several groups: one batched request on v4+, one per group below."""
        wanted = list(dict.fromkeys(group_ids))
        out = {g: self._cache[g] for g in wanted if g in self._cache}
        todo = [g for g in wanted if g not in out]
        backoff = self.new_backoff()
        while todo:
            # No bootstrap server reachable: fail now. A connection lost mid-request: retry,
            # any_connection() reconnects (to another bootstrap server if need be).
            conn = await self.cluster.any_connection()
            try:
                answers = await self._find_coordinator_request(conn, todo)
            except (ConnectionClosed, OSError) as exc:
                await backoff.wait(KafkaError(ErrorCode.NETWORK_EXCEPTION, f"FindCoordinator: {exc}"))
                continue
            retry: list[str] = []
            last: KafkaError | None = None
            for group_id in todo:
                code, message, node = answers.get(
                    group_id, (ErrorCode.COORDINATOR_NOT_AVAILABLE, "no answer for this group", None)
                )
                if node is not None and node.node_id >= 0:
                    self._cache[group_id] = out[group_id] = node
                elif code in _FIND_RETRIABLE or not code:
                    retry.append(group_id)
                    last = group_error(group_id, code or ErrorCode.COORDINATOR_NOT_AVAILABLE, "FindCoordinator")
                else:
                    raise KafkaError(code, f"FindCoordinator for group {group_id!r}: {message or info(code).message}")
            todo = retry
            if todo:
                assert last is not None
                await backoff.wait(last)
        return out

    async def _find_coordinator_request(
        self, conn: BrokerConnection, group_ids: list[str]
    ) -> dict[str, tuple[int, str | None, BrokerNode | None]]:
        version = conn.version_for(FIND_COORDINATOR)
        answers: dict[str, tuple[int, str | None, BrokerNode | None]] = {}
        if version >= 4:
            response = await conn.request(
                FIND_COORDINATOR,
                FindCoordinatorRequest(key_type=KEY_TYPE_GROUP, coordinator_keys=group_ids),
                version=version,
            )
            for c in response.coordinators:
                node = BrokerNode(c.node_id, c.host, c.port) if not c.error_code else None
                answers[c.key] = (c.error_code, c.error_message, node)
            return answers
        for group_id in group_ids:
            response = await conn.request(
                FIND_COORDINATOR,
                FindCoordinatorRequest(key=group_id, key_type=KEY_TYPE_GROUP),
                version=version,
            )
            node = None
            if not response.error_code:
                node = BrokerNode(response.node_id, response.host, response.port)
            message = response.error_message if version >= 1 else None
            answers[group_id] = (response.error_code, message, node)
        return answers

    async def node_connection(self, node: BrokerNode) -> BrokerConnection:
        known = self.cluster.brokers.get(node.node_id)
        if known is None or (known.host, known.port) != (node.host, node.port):
            self.cluster.brokers[node.node_id] = node
        return await self.cluster.connection(node.node_id)

    async def per_group(
        self, group_ids: Iterable[str], what: str, send: SendToCoordinator
    ) -> dict[str, tuple[int, Any, BrokerNode]]:
        """Run ``send`` against each group's coordinator, retrying coordinator errors.

        ``send(conn, ids)`` answers ``{group: (error_code, value)}``; groups whose
        code means "wrong/unavailable coordinator" are rediscovered and resent
        with backoff until the retry timeout. Other codes are returned as is.
        """
        todo = list(dict.fromkeys(group_ids))
        results: dict[str, tuple[int, Any, BrokerNode]] = {}
        backoff = self.new_backoff()
        while todo:
            coordinators = await self.find(todo)
            by_node: dict[BrokerNode, list[str]] = {}
            for group_id in todo:
                by_node.setdefault(coordinators[group_id], []).append(group_id)
            retry: list[str] = []
            last: BaseException | None = None
            for node, ids in by_node.items():
                try:
                    conn = await self.node_connection(node)
                    answers = await send(conn, ids)
                except KafkaError as exc:
                    if exc.code not in COORDINATOR_RETRIABLE:
                        raise
                    answers = {g: (exc.code, None) for g in ids}
                except (ConnectionClosed, OSError) as exc:
                    for group_id in ids:
                        self.forget(group_id)
                    retry.extend(ids)
                    last = KafkaError(
                        ErrorCode.NETWORK_EXCEPTION,
                        f"{what}: coordinator {node.host}:{node.port} unreachable: {exc}",
                    )
                    continue
                for group_id in ids:
                    code, value = answers.get(group_id, (ErrorCode.UNKNOWN_SERVER_ERROR, None))
                    if code in COORDINATOR_RETRIABLE:
                        self.forget(group_id)
                        retry.append(group_id)
                        last = group_error(group_id, code, what)
                    else:
                        results[group_id] = (code, value, node)
            todo = retry
            if todo:
                assert last is not None
                await backoff.wait(last)
        return results
