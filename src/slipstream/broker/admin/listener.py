"""The admin listener: routes over the HTTP server, started and stopped with the broker.

  /metrics            Prometheus text format (broker/admin/prometheus.py)
  /healthz            200 while the process serves (liveness)
  /readyz             200 once __consumer_offsets is loaded, 503 before (readiness)
  /api/topics         topics, partitions, offsets, sizes, traffic (JSON)
  /api/groups         groups with type, state, members and total lag (JSON)
  /api/groups/<id>    one group: members, assignment, committed offsets and lag (JSON)
  /api/groups/<id>/history[?since=SEQ]   the group's rebalance history (JSON; history_view.py)
  /api/groups/<id>/timeline   the history as the CLI's timeline lines (JSON; timeline_view.py)
  /api/groups/<id>/lag        lag per partition over the last minutes (JSON; lag_history.py)
  /api/topics/<name>          one topic (JSON)
  /api/topics/<name>/records?partition=P&offset=O&limit=N   a page of records (JSON; record_browser.py)
  /api                this list
  /, /console/<file>  the web console (static_files.py; console/ holds its HTML, CSS and JS)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from typing import Any

from ...coordinator.coordinator import GroupCoordinator
from ..state import BrokerState
from . import history_view, prometheus, record_browser, static_files, timeline_view, views
from .http_server import HttpRequest, HttpResponse, HttpServer
from .lag_history import LagHistory

log = logging.getLogger(__name__)

_JSON = "application/json"
_GROUPS = "/api/groups/"
_TOPICS = "/api/topics/"
_LAG_SUFFIX = "/lag"
# One lag sample a second: the console's chart shows the last five minutes (lag_history.py).
LAG_SAMPLE_INTERVAL_S = 1.0


class AdminListener:
    def __init__(
        self,
        state: BrokerState,
        coordinator: GroupCoordinator,
        open_connections: Callable[[], int],
        committed: views.CommittedOffsets,
        lag_sample_interval_s: float = LAG_SAMPLE_INTERVAL_S,
    ) -> None:
        """``committed``: the offsets OffsetFetch would answer (durable ones), which every
        lag, committed offset and group with offsets shown here is read from."""
        self.state = state
        self.coordinator = coordinator
        self.committed = committed
        self.registry = prometheus.broker_registry(
            prometheus.BrokerCollector(state, coordinator, open_connections, committed)
        )
        self.lag_history = LagHistory()
        self.lag_sample_interval_s = lag_sample_interval_s
        self.console_files = static_files.load_console_files()
        self._server = HttpServer(self.answer)
        self._sampler: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        return self._server.port

    async def start(self, host: str, port: int) -> None:
        await self._server.start(host, port)
        self._sampler = asyncio.get_running_loop().create_task(self._sample_lag())
        log.info("admin listener on http://%s:%d (console at /, /metrics, /healthz, /readyz, /api)", host, self.port)

    async def stop(self) -> None:
        if self._sampler is not None:
            self._sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sampler
            self._sampler = None
        await self._server.stop()

    def sample_lag(self) -> None:
        """Record one lag sample of every group with committed offsets."""
        # Only the groups the ring keeps are computed: the sampler's cost stays bounded.
        group_ids = views.groups_with_offsets(self.coordinator, self.committed)[: self.lag_history.max_groups]
        lags = {
            group_id: {(p.topic, p.partition): p.lag for p in views.group_lag(self.state, self.committed, group_id)}
            for group_id in group_ids
        }
        self.lag_history.record(self.state.clock(), lags)

    async def _sample_lag(self) -> None:
        while True:
            try:
                self.sample_lag()
            except Exception:  # a sampling bug must not end the sampler, nor the broker
                log.exception("sampling consumer lag failed")
            await asyncio.sleep(self.lag_sample_interval_s)

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
            return _json(200, views.groups_document(self.state, self.coordinator, self.committed))
        if path.startswith(_GROUPS) and path.endswith(timeline_view.TIMELINE_SUFFIX):
            group_id = path[len(_GROUPS) : -len(timeline_view.TIMELINE_SUFFIX)]
            if not self._group_known(group_id):
                return _json(404, {"error": f"no group {group_id!r}"})
            return _json(200, timeline_view.timeline_document(self.coordinator, group_id))
        if path.startswith(_GROUPS) and path.endswith(_LAG_SUFFIX):
            group_id = path[len(_GROUPS) : -len(_LAG_SUFFIX)]
            if not self._group_known(group_id):
                return _json(404, {"error": f"no group {group_id!r}"})
            return _json(200, self.lag_history.document(group_id))
        if path.startswith(_TOPICS) and path.endswith(record_browser.RECORDS_SUFFIX):
            topic = path[len(_TOPICS) : -len(record_browser.RECORDS_SUFFIX)]
            try:
                page = record_browser.records_document(self.state, topic, request.query)
            except record_browser.BadRecordsQuery as exc:
                return _json(400, {"error": str(exc)})
            if page is None:
                return _json(404, {"error": f"no topic {topic!r}"})
            return _json(200, page)
        if path.startswith(_TOPICS):
            topic = path[len(_TOPICS) :]
            document = views.topic_document(self.state, topic)
            if document is None:
                return _json(404, {"error": f"no topic {topic!r}"})
            return _json(200, document)
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
            document = views.group_document(self.state, self.coordinator, self.committed, group_id)
            if document is None:
                return _json(404, {"error": f"no group {group_id!r}"})
            return _json(200, document)
        if path == "/api":
            return HttpResponse(200, (__doc__ or "").encode())
        # The raw path: "/console/" must not lose its slash to the normalising above.
        static = static_files.lookup(self.console_files, request.path)
        if static is not None:
            return HttpResponse(200, static.body, static.content_type, headers=dict(static_files.CONSOLE_HEADERS))
        return HttpResponse(404, f"no such endpoint: {request.path}\n".encode())

    def _group_known(self, group_id: str) -> bool:
        return (
            views.group_summary(self.coordinator, group_id) is not None
            or bool(self.committed.committed_offsets(group_id))
            or bool(self.coordinator.history.events(group_id))
        )


def _json(status: int, document: Any) -> HttpResponse:
    return HttpResponse(
        status, json.dumps(document, indent=1).encode() + b"\n", _JSON, headers={"X-Content-Type-Options": "nosniff"}
    )
