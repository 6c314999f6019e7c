"""``slipstream groups history GROUP [--follow]``: a group's rebalance history as a timeline.

Kafka has no API for this, so it comes from a Slipstream broker's admin listener
(``slipstream serve --admin-port N``): ``GET /api/groups/<group>/history?since=SEQ``
answers the group's events as JSON, each numbered (``seq``). ``--follow`` asks again
every ``--interval`` seconds for the events after the last one printed, until
interrupted. The admin URL comes from ``--admin-url`` or ``SLIPSTREAM_ADMIN_URL``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import TYPE_CHECKING, Any

from ..coordinator.history import GroupEvent, event_from_dict
from ..coordinator.history_timeline import TimelineFormatter

if TYPE_CHECKING:
    from .client_commands import Sub

ADMIN_URL_ENV = "SLIPSTREAM_ADMIN_URL"
_TIMEOUT_S = 10.0


class HistoryUnavailable(Exception):
    """The admin listener could not be asked, or answered something else than a history."""


def add_command(gsub: Sub) -> None:
    p = gsub.add_parser(
        "history",
        help="the rebalance history of a group as a timeline (from a Slipstream broker's admin listener)",
        description="Every decision the coordinator took about the group, with its cause and time, and a "
        "summary per generation (how long it took, what it waited for). Served by a Slipstream broker's "
        "admin listener (slipstream serve --admin-port N); Kafka has no API for it.",
    )
    p.add_argument("group")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing new events until interrupted")
    p.add_argument(
        "--admin-url",
        default=os.environ.get(ADMIN_URL_ENV),
        help=f"the broker's admin listener, e.g. http://127.0.0.1:9644 (default: ${ADMIN_URL_ENV})",
    )
    p.add_argument("--interval", type=float, default=1.0, help="seconds between polls with --follow (default 1)")
    p.add_argument("--json", action="store_true", help="print the events as JSON lines instead of a timeline")
    p.add_argument(
        "--full-ids", action="store_true",
        help="print member ids whole (default: a client's <client id>-<UUID> ids keep 8 digits of the UUID)",
    )
    p.set_defaults(func=_history)


def history_url(admin_url: str, group_id: str, since: int = 0) -> str:
    base = admin_url.rstrip("/")
    path = f"/api/groups/{urllib.parse.quote(group_id, safe='')}/history"
    return f"{base}{path}" + (f"?since={since}" if since else "")


def fetch_history(admin_url: str, group_id: str, since: int = 0) -> tuple[list[dict[str, Any]], int]:
    """The group's events after ``since`` as the admin listener sends them (JSON dicts with
    ``seq``), and the broker's last event number (lower than ``since``: the broker restarted)."""
    url = history_url(admin_url, group_id, since)
    try:
        with urllib.request.urlopen(url, timeout=_TIMEOUT_S) as response:
            document = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise HistoryUnavailable(f"the broker knows no group {group_id!r}") from None
        raise HistoryUnavailable(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise HistoryUnavailable(f"cannot reach the admin listener at {admin_url}: {reason}") from None
    except json.JSONDecodeError:
        raise HistoryUnavailable(f"{url} did not answer JSON") from None
    events = document.get("events") if isinstance(document, dict) else None
    if not isinstance(events, list):
        raise HistoryUnavailable(f"{url} did not answer a history")
    return events, int(document.get("last_seq", 0))


def _decode(events: list[dict[str, Any]]) -> list[GroupEvent]:
    decoded = []
    for raw in events:
        try:
            decoded.append(event_from_dict(raw))
        except ValueError:
            continue  # a kind a newer broker knows: skipped, not fatal
    return decoded


def _history(args: argparse.Namespace) -> int:
    if not args.admin_url:
        print(
            f"slipstream: groups history needs the broker's admin listener: --admin-url URL or ${ADMIN_URL_ENV} "
            "(start the broker with --admin-port N)",
            file=sys.stderr,
        )
        return 2
    formatter = TimelineFormatter(short_ids=not args.full_ids)
    since = 0
    try:
        while True:
            try:
                raw, last_seq = fetch_history(args.admin_url, args.group, since)
                if last_seq < since:
                    # The broker restarted (its numbering too): start over from its history.
                    since = 0
                    raw, last_seq = fetch_history(args.admin_url, args.group, since)
            except HistoryUnavailable as exc:
                if args.follow and since:
                    raw = []  # the broker restarting: keep following
                else:
                    print(f"slipstream: {exc}", file=sys.stderr)
                    return 1
            if raw:
                since = max(int(e.get("seq", 0)) for e in raw)
            if args.json:
                for e in raw:
                    print(json.dumps(e))
            else:
                for line in formatter.feed(_decode(raw)):
                    print(line)
            if not args.follow:
                if not raw:
                    print(f"no history for group {args.group}")
                return 0
            sys.stdout.flush()
            time.sleep(args.interval)
    except KeyboardInterrupt:
        return 0
