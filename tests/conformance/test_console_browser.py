"""The web console in a real headless Chromium (Debian's /usr/bin/chromium, driven by
Playwright) against a broker process, while real confluent-kafka consumers join and leave
a group: the tests read the pages as a person would (state text, member rows, grid cells,
the lag chart, timeline lines with causes, the record browser's decoded values).

One broker and one browser serve the whole module. Screenshots go to
test-artifacts/console/ (git-ignored). Without chromium or playwright the tests skip
locally and fail in CI (slipstream.testing.peers); scripts/setup_chromium.sh installs it.
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from test_groups_harness import Member, start_python_member

from slipstream.testing.broker_process import CONSUMER_BROKER_ARGS, BrokerProcess, running_broker
from slipstream.testing.peers import missing_peer
from slipstream.testing.ports import free_port

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(150)]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    # Containers often give /dev/shm 64 MB, too little for Chromium's renderer.
    "--disable-dev-shm-usage",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "console"
WAIT_MS = 30_000  # how long a page may take to show what a step expects


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, str]]:
    port = free_port()
    args = (*CONSUMER_BROKER_ARGS, "--admin-port", str(port), "--set", "group.initial.rebalance.delay.ms=0")
    for broker in running_broker(tmp_path_factory.mktemp("console-broker"), args):
        base = f"http://127.0.0.1:{port}"
        _wait_ready(base)
        yield broker, base


def _wait_ready(base: str) -> None:
    import time

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(base + "/readyz", timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError("the broker never became ready")


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A fresh Chromium profile; one page per test from it."""
    if not os.path.exists(CHROMIUM):
        missing_peer(f"{CHROMIUM} is missing (scripts/setup_chromium.sh installs it)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing_peer("playwright is not installed (pip install -e '.[test]')")
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1200, "height": 900},
        )
        try:
            yield context
        finally:
            context.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    # Console errors too: a Content-Security-Policy violation or a failed load shows there.
    # A 404 from the JSON API is an answer the page shows (a group not there yet).
    page.on("console", lambda msg: errors.append(f"{msg.text} ({msg.location.get('url')})")
            if msg.type == "error" and "/api/" not in (msg.location.get("url") or "") else None)
    try:
        yield page
    finally:
        page.close()
    assert not errors, f"the page reported errors: {errors}"


def screenshot(page: Any, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(15)


def produce(bootstrap: str, topic: str, records: list[tuple[int, bytes, bytes, list[tuple[str, bytes]]]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 0})
    for partition, key, value, headers in records:
        producer.produce(topic, value, key, partition=partition, headers=headers)
    assert producer.flush(15) == 0


def test_overview_and_record_browser_show_what_was_produced(console, page) -> None:
    from playwright.sync_api import expect

    broker, base = console
    topic = "console-orders"
    create_topic(broker.bootstrap, topic, 3)
    orders = [(1, f"order-{i}".encode(), json.dumps({"order": i, "item": "tea"}).encode(), [("source", b"web")])
              for i in range(8)]
    orders.append((1, b"raw", b"\x00\xff\x10binary", []))
    produce(broker.bootstrap, topic, orders)

    page.goto(base + "/")
    row = page.locator(f'#topics-table tr[data-topic="{topic}"]')
    expect(row).to_be_visible(timeout=WAIT_MS)
    expect(row.locator("td").nth(1)).to_have_text("3")  # partitions
    expect(row.locator('td[data-col="records"]')).to_have_text("9", timeout=WAIT_MS)
    expect(row.locator('td[data-col="throughput"]')).to_contain_text("rec/s")
    expect(row.locator('td[data-col="rate-chart"] svg polyline')).to_have_count(1)

    row.locator("a").click()
    expect(page.locator("h1")).to_have_text(f"Topic {topic}")
    expect(page.locator('#partitions-table tr[data-partition="1"] td').nth(2)).to_have_text("9")
    expect(page.locator("#records-range")).to_have_text("Partition 0 is empty (next offset 0).", timeout=WAIT_MS)
    page.select_option("#browse-partition", "1")
    order7 = page.locator('#records-table tr[data-offset="7"]')
    expect(order7.locator("td.key")).to_have_text("order-7", timeout=WAIT_MS)
    # JSON is the default view: the value pretty-printed.
    expect(order7.locator("td.value pre.json")).to_contain_text('"order": 7')
    expect(order7.locator("td.value pre.json")).to_contain_text('"item": "tea"')
    expect(order7.locator("td.headers")).to_contain_text("source")
    expect(order7.locator("td.headers")).to_contain_text("web")
    # Bytes that are not UTF-8 show as hex whatever the format.
    expect(page.locator('#records-table tr[data-offset="8"] td.value pre.hex')).to_have_text("00 ff 10 62 69 6e 61 72 79")
    screenshot(page, "topic-records-json")

    page.select_option("#browse-format", "hex")
    expect(order7.locator("td.value pre.hex")).to_contain_text("7b 22 6f 72 64 65 72 22")  # {"order"
    page.select_option("#browse-format", "text")
    expect(order7.locator("td.value pre.text")).to_have_text('{"order": 7, "item": "tea"}')

    # Paging from an offset: the whole partition from its start.
    page.uncheck("#browse-follow")
    page.select_option("#browse-limit", "10")
    page.fill("#browse-offset", "0")
    page.press("#browse-offset", "Enter")
    expect(page.locator("#records-table tbody tr")).to_have_count(9, timeout=WAIT_MS)
    expect(page.locator("#records-table tbody tr").first).to_have_attribute("data-offset", "0")

    page.goto(base + "/#/topics/no-such-topic")
    expect(page.locator("#topic-missing")).to_have_text("no topic 'no-such-topic'", timeout=WAIT_MS)


def test_group_page_follows_real_rebalances(console, page) -> None:
    from playwright.sync_api import expect

    broker, base = console
    topic, group = "console-events", "console-group"
    create_topic(broker.bootstrap, topic, 4)
    produce(broker.bootstrap, topic, [(p, b"k", f"event-{p}-{i}".encode(), []) for p in range(4) for i in range(5)])
    members: list[Member] = []
    try:
        first = start_python_member("confluent", "console-c1", broker.bootstrap, topic, group)
        members.append(first)
        page.goto(f"{base}/#/groups/{group}")
        expect(page.locator("#group-state")).to_have_text("Stable", timeout=WAIT_MS)
        expect(page.locator("#group-protocol-type")).to_have_text("consumer")
        expect(page.locator("#group-protocol")).to_have_text("range")
        expect(page.locator("#members-table tbody tr")).to_have_count(1)
        expect(page.locator("#members-table td.client-id")).to_have_text("console-c1")
        expect(page.locator("#members-table td.host").first).to_contain_text("127.0.0.1")
        expect(page.locator("#assignment-grid td.assigned")).to_have_count(4, timeout=WAIT_MS)

        second = start_python_member("confluent", "console-c2", broker.bootstrap, topic, group)
        members.append(second)
        expect(page.locator("#members-table tbody tr")).to_have_count(2, timeout=WAIT_MS)
        expect(page.locator("#group-state")).to_have_text("Stable", timeout=WAIT_MS)
        grid_rows = page.locator("#assignment-grid tbody tr")
        expect(grid_rows).to_have_count(2)
        # Range over 4 partitions and 2 members: two cells each, every column owned once.
        for i in range(2):
            expect(grid_rows.nth(i).locator("td.assigned")).to_have_count(2, timeout=WAIT_MS)
        for p in range(4):
            expect(page.locator(f'#assignment-grid td.assigned[data-partition="{topic}-{p}"]')).to_have_count(1)
        expect(page.locator("#timeline li.event span.text", has_text=re.compile(r"^member console-c2-\w+ joined"))).to_have_count(1)
        # The lag chart: one line per committed partition, from the broker's samples.
        expect(page.locator("#lag-chart polyline")).to_have_count(4, timeout=WAIT_MS)
        expect(page.locator(".chart-legend")).to_contain_text(f"{topic}-3: 0", timeout=WAIT_MS)
        screenshot(page, "group-two-members")

        second.close()
        members.remove(second)
        expect(page.locator("#members-table tbody tr")).to_have_count(1, timeout=WAIT_MS)
        expect(page.locator("#group-state")).to_have_text("Stable", timeout=WAIT_MS)
        left = page.locator("#timeline li.event span.text", has_text=re.compile(r"^member console-c2-\w+ left"))
        expect(left).to_have_count(1, timeout=WAIT_MS)
        # The generation's summary names its cause: the member that left.
        expect(page.locator("#timeline li.summary", has_text=re.compile(r"generation \d+: .*after member console-c2-\w+ left"))).to_have_count(1, timeout=WAIT_MS)
        expect(page.locator("#assignment-grid td.assigned")).to_have_count(4, timeout=WAIT_MS)

        # Records nobody consumes yet: the chart's legend shows the lag.
        first.close()
        members.remove(first)
        produce(broker.bootstrap, topic, [(0, b"k", b"late", [])] * 3)
        expect(page.locator("#group-state")).to_have_text("Empty", timeout=WAIT_MS)
        expect(page.locator(".chart-legend")).to_contain_text(f"{topic}-0: 3", timeout=WAIT_MS)
        expect(page.locator("#group-lag")).to_have_text("3")
        shot = screenshot(page, "group")
        assert shot.stat().st_size > 10_000

        page.goto(base + "/")
        expect(page.locator(f'#groups-table tr[data-group="{group}"] td').nth(2)).to_have_text("Empty", timeout=WAIT_MS)
        screenshot(page, "overview")
    finally:
        for member in members:
            member.reap()


def test_consumer_protocol_group_page_shows_epochs_and_reconciliations(console, page) -> None:
    from playwright.sync_api import expect

    broker, base = console
    topic, group = "console-kip848", "console-848"
    create_topic(broker.bootstrap, topic, 4)
    members: list[Member] = []
    try:
        for name in ("console-k1", "console-k2"):
            members.append(start_python_member("confluent", name, broker.bootstrap, topic, group, group_protocol="consumer"))
        page.goto(f"{base}/#/groups/{group}")
        expect(page.locator("#group-type")).to_have_text("consumer", timeout=WAIT_MS)
        expect(page.locator("#members-table tbody tr")).to_have_count(2, timeout=WAIT_MS)
        expect(page.locator("#members-table th").nth(4)).to_have_text("Epoch")
        rows = page.locator("#assignment-grid tbody tr")
        for i in range(2):  # the uniform assignor: two partitions each once reconciled
            expect(rows.nth(i).locator("td.assigned")).to_have_count(2, timeout=WAIT_MS)
        expect(page.locator("#group-state")).to_have_text("Stable", timeout=WAIT_MS)
        expect(page.locator("#lag-chart-empty")).to_be_visible()  # nothing consumed, nothing committed
        reconciled = page.locator("#timeline li.summary span.text", has_text=re.compile(r"^epoch \d+: reconciled in "))
        expect(reconciled.last).to_contain_text("after member", timeout=WAIT_MS)
        screenshot(page, "group-consumer-protocol")
    finally:
        for member in members:
            member.reap()


def test_unknown_paths_and_traversal_get_404(console) -> None:
    _broker, base = console
    for path in ("/console/../listener.py", "/console/%2e%2e/listener.py", "/console/.hidden", "/console/nope.js",
                 "/etc/passwd", "/console/console.js/x"):
        try:
            with urllib.request.urlopen(base + path, timeout=5) as response:
                status = response.status
        except urllib.error.HTTPError as exc:
            status = exc.code
        assert status == 404, path
    with urllib.request.urlopen(base + "/console/console.js", timeout=5) as response:
        assert response.headers["Content-Type"].startswith("text/javascript")
