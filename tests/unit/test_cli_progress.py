"""Progress on stderr for long CLI commands: the line's layout and redraw rules on a
manual clock, ``produce --file`` and ``consume --progress`` against an in-process broker."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from slipstream.broker.broker import Broker
from slipstream.cli import main
from slipstream.cli.progress import Progress, render, wanted

pytestmark = pytest.mark.timeout(60)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_line_with_and_without_a_known_total() -> None:
    line = render("orders", 45_000, 4.5, done_bytes=12 * 1024 * 1024, total_bytes=24 * 1024 * 1024)
    assert line == "orders  [############............]   50%  12.0/24.0 MiB  45,000 records  10,000 rec/s  ETA 4.5 s"
    assert render("orders", 120_000, 75.0) == "orders  120,000 records  1,600 rec/s  1 min 15 s"
    done = render("small", 3, 0.0, done_bytes=2048, total_bytes=2048)
    assert done == "small  [########################]  100%  2.0/2.0 KiB  3 records  0 rec/s  0.0 s"


def test_redraws_are_throttled_and_finish_ends_the_line() -> None:
    clock = Clock()
    out = io.StringIO()
    progress = Progress(out, "t", enabled=True, clock=clock)
    progress.update(10)
    clock.now += 0.05
    progress.update(20)  # too soon after the last redraw
    assert out.getvalue().count("\r") == 1 and "10 records" in out.getvalue()
    clock.now += 0.1
    progress.update(30)
    assert out.getvalue().count("\r") == 2 and "30 records" in out.getvalue()
    progress.finish()
    assert out.getvalue().endswith("\n") and out.getvalue().count("\r") == 3
    quiet = io.StringIO()
    off = Progress(quiet, "t", enabled=False, clock=clock)
    off.update(5)
    off.finish()
    assert quiet.getvalue() == ""


def test_shown_on_a_terminal_unless_told() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert wanted(None, Tty()) and not wanted(None, io.StringIO())
    assert wanted(True, io.StringIO()) and not wanted(False, Tty())


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(storage="memory", port=0) as b:
        yield b


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_produce_a_file_with_progress(broker: Broker, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    b = ("-b", broker.bootstrap_servers)
    assert run(capsys, "topics", "create", "cli-file", "-p", "1", *b)[0] == 0
    data = tmp_path / "import.txt"
    # Windows line ends are line ends, as on stdin; 2,500 lines span three acknowledged batches.
    data.write_bytes(b"".join(b"k%d=v%d\r\n" % (i, i) for i in range(2500)))
    code, _out, err = run(capsys, "produce", "cli-file", "--file", str(data), "-k", "=", "--progress", *b)
    assert code == 0 and "produced 2500 records to cli-file" in err
    assert err.count("\r") >= 2  # redrawn in place
    final = err.split("\r")[-1]
    assert "100%" in final and "2,500 records" in final
    code, out, err = run(capsys, "consume", "cli-file", "--from-beginning", "--max-messages", "2500", "--print-key",
                         "--key-separator", "=", *b)  # fmt: skip
    assert code == 0 and out.splitlines() == [f"k{i}=v{i}" for i in range(2500)]
    assert "\r" not in err  # stderr is no terminal here: no progress unless asked


def test_produce_file_errors_are_clear(broker: Broker, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    b = ("-b", broker.bootstrap_servers)
    code, _out, err = run(capsys, "produce", "cli-file", "--file", str(tmp_path / "missing.txt"), *b)
    assert code == 1 and "cannot read" in err and "missing.txt" in err
    bad = tmp_path / "latin1.txt"
    bad.write_bytes(b"ok\ncaf\xe9\n")
    code, _out, err = run(capsys, "produce", "cli-file", "--file", str(bad), *b)
    assert code == 1 and "line 2 of the file is not UTF-8" in err


def test_consume_shows_progress_when_asked(broker: Broker, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    b = ("-b", broker.bootstrap_servers)
    assert run(capsys, "topics", "create", "cli-cprog", "-p", "1", *b)[0] == 0
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(f"r{i}\n" for i in range(30))))
    assert run(capsys, "produce", "cli-cprog", *b)[0] == 0
    code, out, err = run(capsys, "consume", "cli-cprog", "--from-beginning", "--max-messages", "30", "--progress", *b)
    assert code == 0 and len(out.splitlines()) == 30
    assert err.endswith("\n") and "30 records" in err.split("\r")[-1]
