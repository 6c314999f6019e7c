"""cli/dataclass_code.py: dataclasses made from kept code behave as freshly compiled ones,
and a run that finds its classes on file compiles nothing."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from slipstream.cli import dataclass_code
from slipstream.cli.dataclass_code import DataclassCode


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


def _run(path: Path) -> DataclassCode:
    """One process's worth: install, make the classes, check them, save, uninstall."""
    code = DataclassCode(path)
    code.install()
    try:
        _check(*_make_classes())
        code.save()
    finally:
        code.uninstall()
    return code


def test_a_second_run_compiles_nothing_and_its_classes_behave_the_same(tmp_path: Path, writable: None) -> None:
    path = tmp_path / "pycache" / "dataclass-code.bin"
    first = _run(path)
    assert path.exists() and len(first._codes) >= 8  # init, repr, eq, hash, setattr, ...
    compiled: list[str] = []
    second = DataclassCode(path)
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
    path = tmp_path / "dataclass-code.bin"
    _run(path)
    good = path.read_bytes()
    for damaged in (b"", b"\x00" * 40, good[:-20], b"XXXXX" + good[5:]):
        path.write_bytes(damaged)
        code = _run(path)
        assert code._unsaved is False  # saved: the classes were compiled afresh
        assert path.read_bytes().startswith(good[:5])
    # A kept entry that is not code (a file written by something else) is compiled anew.
    code = DataclassCode(path)
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
    path = tmp_path / "dataclass-code.bin"
    _run(path)
    assert not path.exists()
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    _run(blocked / "dataclass-code.bin")  # its directory cannot be made: no error
    _run(Path("/proc/no-such-dir/dataclass-code.bin"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def test_the_process_wide_one_is_installed_once_and_removed(tmp_path: Path, writable: None) -> None:
    path = tmp_path / "dataclass-code.bin"
    first = dataclass_code.install(path)
    try:
        assert dataclass_code.install(tmp_path / "other.bin") is first
        assert "exec" in vars(dataclasses)
        _check(*_make_classes())
    finally:
        dataclass_code.uninstall()
    assert path.exists()  # uninstall saves
    assert "exec" not in vars(dataclasses)
    dataclass_code.save()  # none installed: nothing to do


def test_the_default_place_is_beside_the_packages_bytecode() -> None:
    path = dataclass_code.default_path()
    assert path is not None
    assert path.name == f"dataclass-code.{sys.implementation.cache_tag}.bin"
    assert path.parent.name == "__pycache__" or sys.pycache_prefix is not None
