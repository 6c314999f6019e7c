"""The admin listener: routes over the HTTP server, started and stopped with the broker.

  /metrics            Prometheus text format (broker/admin/prometheus.py)
  /healthz            200 while the process serves (liveness)
  /readyz             200 once __consumer_offsets is loaded, 503 before (readiness)
  /api/topics         topics, partitions, offsets, sizes, traffic (JSON)
  /api/groups         groups with type, state, members and total lag (JSON)
  /api/groups/<id>    one group: members, assignment, committed offsets and lag (JSON)
  /api/groups/<id>/history[?since=SEQ]   the group's rebalance history (JSON; history_view.py)
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from ...coordinator.coordinator import GroupCoordinator
from ..state import BrokerState
from . import history_view, prometheus, views
from .http_server import HttpRequest, HttpResponse, HttpServer

log = logging.getLogger(__name__)

_JSON = "application/json"


class AdminListener:
    def __init__(self, state: BrokerState, coordinator: GroupCoordinator, open_connections: Callable[[], int]) -> None:
        self.state = state
        self.coordinator = coordinator
        self.registry = prometheus.broker_registry(
            prometheus.BrokerCollector(state, coordinator, open_connections)
        )
        self._server = HttpServer(self.answer)

    @property
    def port(self) -> int:
        return self._server.port

    async def start(self, host: str, port: int) -> None:
        await self._server.start(host, port)
        log.info("admin listener on http://%s:%d (/metrics, /healthz, /readyz, /api)", host, self.port)

    async def stop(self) -> None:
        await self._server.stop()

    async def answer(self, request: HttpRequest) -> HttpResponse:
        path = request.path.rstrip("/") or "/"
        if path == "/metrics":
            return HttpResponse(200, prometheus.render(self.registry), prometheus.CONTENT_TYPE)
        if path == "/healthz":
            return HttpResponse(200, b"ok\n")
        if path == "/readyz":
            if views.is_ready(self.coordinator):
                return HttpResponse(200, b"ready\n")
            return HttpResponse(503, b"loading __consumer_offsets\n")
        if path == "/api/topics":
            return _json(200, views.topics_document(self.state))
        if path == "/api/groups":
            return _json(200, views.groups_document(self.state, self.coordinator))
        if path.startswith("/api/groups/") and path.endswith(history_view.HISTORY_SUFFIX):
            group_id = path[len("/api/groups/") : -len(history_view.HISTORY_SUFFIX)]
            try:
                since = history_view.parse_since(request.query.get("since"))
            except history_view.BadSince as exc:
                return _json(400, {"error": str(exc)})
            history = history_view.history_document(self.coordinator, group_id, since)
            if history is None:
                return _json(404, {"error": f"no group {group_id!r}"})
            return _json(200, history)
        if path.startswith("/api/groups/"):
            group_id = path[len("/api/groups/") :]
            document = views.group_document(self.state, self.coordinator, group_id)
            if document is None:
                return _json(404, {"error": f"no group {group_id!r}"})
            return _json(200, document)
        if path == "/":
            return HttpResponse(200, (__doc__ or "").encode())
        return HttpResponse(404, f"no such endpoint: {request.path}\n".encode())


def _json(status: int, document: Any) -> HttpResponse:
    return HttpResponse(status, json.dumps(document, indent=1).encode() + b"\n", _JSON)
