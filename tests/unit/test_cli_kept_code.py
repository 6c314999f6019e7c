"""cli/kept_code.py: dataclasses made from kept code behave as freshly compiled ones,
and a run that finds its classes on file compiles nothing."""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from slipstream.cli import kept_code
from slipstream.cli.kept_code import KeptCode
from slipstream.protocol import generated_code


def _make_classes() -> tuple[type, type]:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Point:
        x: int
        y: int = 2
        tags: list[str] = dataclasses.field(default_factory=list)

    @dataclasses.dataclass(order=True)
    class Version:
        major: int
        minor: int = 0

    return Point, Version


def _check(point_cls: type, version_cls: type) -> None:
    p = point_cls(1)
    assert (p.x, p.y, p.tags) == (1, 2, [])
    assert repr(p).endswith("Point(x=1, y=2, tags=[])")
    assert p == point_cls(1, 2, []) and p != point_cls(1, 3)
    assert hash(point_cls(1, 2, ())) == hash(point_cls(1, 2, ()))
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.x = 5
    assert version_cls(1, 2) < version_cls(1, 3)
    v = version_cls(1)
    v.minor = 4
    assert v == version_cls(1, 4)
    assert vars(point_cls)["__init__"].__qualname__.endswith("Point.__init__")


@pytest.fixture
def writable(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    yield
    assert "exec" not in vars(dataclasses)  # every test gives dataclasses its exec back


def _run(path: Path) -> KeptCode:
    """One process's worth: install, make the classes, check them, save, uninstall."""
    code = KeptCode(path)
    code.install()
    try:
        _check(*_make_classes())
        code.save()
    finally:
        code.uninstall()
    return code


def test_a_second_run_compiles_nothing_and_its_classes_behave_the_same(tmp_path: Path, writable: None) -> None:
    path = tmp_path / "pycache" / "kept-code.bin"
    first = _run(path)
    assert path.exists() and len(first._codes) >= 8  # init, repr, eq, hash, setattr, ...
    compiled: list[str] = []
    second = KeptCode(path)
    second.install()
    try:
        real_compile = compile

        def counting_compile(source: str, *args: object, **kwargs: object) -> object:
            compiled.append(source)
            return real_compile(source, *args, **kwargs)  # type: ignore[call-overload]

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr("builtins.compile", counting_compile)
            _check(*_make_classes())
    finally:
        second.uninstall()
    assert compiled == []
    assert not second._unsaved
    before = path.stat().st_mtime_ns
    second.save()  # nothing new: nothing written
    assert path.stat().st_mtime_ns == before


def test_a_damaged_or_foreign_file_is_compiled_afresh_and_replaced(tmp_path: Path, writable: None) -> None:
    path = tmp_path / "kept-code.bin"
    _run(path)
    good = path.read_bytes()
    for damaged in (b"", b"\x00" * 40, good[:-20], b"XXXXX" + good[5:]):
        path.write_bytes(damaged)
        code = _run(path)
        assert code._unsaved is False  # saved: the classes were compiled afresh
        assert path.read_bytes().startswith(good[:5])
    # A kept entry that is not code (a file written by something else) is compiled anew.
    code = KeptCode(path)
    code._codes = {text: b"\x00not marshal" for text in code._load()}
    code.install()
    try:
        _check(*_make_classes())
    finally:
        code.uninstall()


def test_nothing_is_written_without_bytecode_writing_or_a_writable_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    path = tmp_path / "kept-code.bin"
    _run(path)
    assert not path.exists()
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    _run(blocked / "kept-code.bin")  # its directory cannot be made: no error
    _run(Path("/proc/no-such-dir/kept-code.bin"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def test_the_process_wide_one_is_installed_once_and_removed(tmp_path: Path, writable: None) -> None:
    path = tmp_path / "kept-code.bin"
    first = kept_code.install(path)
    try:
        assert kept_code.install(tmp_path / "other.bin") is first
        assert "exec" in vars(dataclasses)
        _check(*_make_classes())
    finally:
        kept_code.uninstall()
    assert path.exists()  # uninstall saves
    assert "exec" not in vars(dataclasses)
    kept_code.save()  # none installed: nothing to do


def test_the_default_place_is_beside_the_packages_bytecode() -> None:
    path = kept_code.default_path()
    assert path is not None
    assert os.path.basename(path) == f"kept-code.{sys.implementation.cache_tag}.bin"
    assert os.path.basename(os.path.dirname(path)) == "__pycache__" or sys.pycache_prefix is not None


def test_the_protocols_generated_code_is_kept_too(tmp_path: Path, writable: None) -> None:
    path = tmp_path / "kept-code.bin"
    source = "def encode(x):\n    return x + 1\n"
    assert generated_code.keeper is None
    plain = generated_code.compile_generated(source, "<slipstream codec encode>")
    first = KeptCode(path)
    first.install()
    try:
        assert generated_code.keeper is first
        assert generated_code.compile_generated(source, "<slipstream codec encode>") == plain
        first.save()
    finally:
        first.uninstall()
    assert generated_code.keeper is None
    second = KeptCode(path)
    second.install()
    try:
        kept = generated_code.compile_generated(source, "<slipstream codec encode>")
        # Another file name is another entry (tracebacks name the generator).
        other = generated_code.compile_generated(source, "<slipstream codec decode>")
    finally:
        second.uninstall()
    assert kept == plain and kept.co_filename == "<slipstream codec encode>"
    assert other.co_filename == "<slipstream codec decode>"
    assert second._unsaved  # only the new file name was compiled
    namespace: dict[str, Any] = {}
    exec(kept, {}, namespace)
    assert namespace["encode"](41) == 42


def test_what_a_run_compiles_is_on_file_at_once_without_a_save(tmp_path: Path, writable: None) -> None:
    path = tmp_path / "kept-code.bin"
    killed = KeptCode(path)  # a broker stopped (kill -9) before any save
    killed.install()
    try:
        _check(*_make_classes())
    finally:
        killed.uninstall()
    appended = path.read_bytes()
    assert len(appended) > 100
    path.write_bytes(appended + b"\x10\x00\x00\x00torn")  # the next record, cut short
    second = CompilingRun(path)
    assert second.compiled == []
    assert path.read_bytes().startswith(appended[:5])


class CompilingRun:
    """A run over ``path`` that records what it had to compile."""

    def __init__(self, path: Path) -> None:
        self.compiled: list[str] = []
        code = KeptCode(path)
        code.install()
        try:
            real_compile = compile

            def counting_compile(source: str, *args: object, **kwargs: object) -> object:
                self.compiled.append(source)
                return real_compile(source, *args, **kwargs)  # type: ignore[call-overload]

            with pytest.MonkeyPatch.context() as mp:
                mp.setattr("builtins.compile", counting_compile)
                _check(*_make_classes())
            code.save()
        finally:
            code.uninstall()
