"""Compiled generated code, kept between runs of ``slipstream serve``.

Why: ``dataclasses`` makes each class's ``__init__``, ``__repr__`` and ``__eq__`` (and
for frozen classes ``__setattr__``, ``__delattr__`` and ``__hash__``) by compiling
generated source text, one ``exec`` per method, and the protocol layer compiles its
codecs and struct initializers the same way (protocol/generated_code.py). Some 40
dataclasses and a dozen codecs are made before a broker answers its first request, and
compiling them was about a fifth of the start's CPU. The texts are the same from one
run to the next, so their compiled code is kept in a file beside the package's .pyc
files (``sys.pycache_prefix`` honoured, nothing written under
``sys.dont_write_bytecode``), keyed by the exact text (and file name): a changed class
or declaration makes a new text, compiled afresh. What a run compiles is appended to
the file at once, as a .pyc is written at import (a broker stopped a moment after its
start has kept it all), and ``save`` rewrites the file as one table, quicker to load. Running a kept code object makes the
same functions as compiling the text again: it was compiled from that text by this
interpreter's bytecode version at this optimization level, with the same flags
(dataclasses' texts with none inherited, the protocol's as protocol/generated_code.py
compiles them).
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import importlib.util
import marshal
import os
import sys
import threading
from collections.abc import Callable
from types import CodeType
from typing import Any

from ..protocol import generated_code

# More texts than this on file (classes changed over many upgrades): a save keeps only
# the ones this process used.
MAX_KEPT = 4096


def default_path() -> str | None:
    """Where the code is kept: beside this package's .pyc files (None if unknown). (Paths
    are strs here: pathlib costs a start some 16 M instructions.)"""
    try:
        pyc = importlib.util.cache_from_source(__file__)
    except (NotImplementedError, ValueError):  # no cache tag: nothing is cached anyway
        return None
    return os.path.join(os.path.dirname(pyc), f"kept-code.{sys.implementation.cache_tag}.bin")


def _header() -> bytes:
    # The bytecode version and the optimization level the code was compiled for.
    return importlib.util.MAGIC_NUMBER + bytes([sys.flags.optimize])


def _code(kept: object) -> CodeType | None:
    """The code object a kept entry holds (None if there is none, or it is damaged)."""
    if isinstance(kept, bytes):
        try:
            kept = marshal.loads(kept)
        except (EOFError, ValueError, TypeError):
            return None
    return kept if isinstance(kept, CodeType) else None


class KeptCode:
    """Serves ``dataclasses``' ``exec`` calls and the protocol layer's compiles from
    compiled code kept on file."""

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self.path = None if path is None else os.fspath(path)
        # Text -> its code, marshalled: unmarshalled on first use (a file holds the
        # classes of every module a broker may load; a start uses about half of them).
        self._codes: dict[str, CodeType | bytes] = {}
        self._used: set[str] = set()
        self._unsaved = False  # something was compiled that is not in the file's table yet
        self._installed = False
        # Whether the file, if any, is ours to append to (this interpreter's, undamaged).
        self._appendable = True
        self._appending = threading.Lock()  # the worker thread compiles too

    def install(self) -> None:
        """Load what is on file; serve ``dataclasses``' ``exec`` calls and the protocol's
        compiles from now on."""
        if self._installed or "exec" in vars(dataclasses) or generated_code.keeper is not None:
            return
        self._codes = self._load()
        # The module's global shadows the builtin, for dataclasses' own calls only.
        dataclasses.exec = self._exec  # type: ignore[attr-defined]
        generated_code.keeper = self
        self._installed = True

    def uninstall(self) -> None:
        if self._installed:
            if vars(dataclasses).get("exec") == self._exec:
                del dataclasses.exec  # type: ignore[attr-defined]
            if generated_code.keeper is self:
                generated_code.keeper = None
            self._installed = False

    def kept(self, key: str, make: Callable[[], CodeType]) -> CodeType:
        """The code kept under ``key``, else ``make()`` (kept from now on)."""
        code = _code(self._codes.get(key))
        if code is None:  # a new text (or a damaged file)
            code = make()
            self._unsaved = True
            self._append(key, code)
        self._codes[key] = code
        self._used.add(key)
        return code

    def _exec(self, source: Any, globals: Any = None, locals: Any = None) -> None:
        if not isinstance(source, str):
            builtins.exec(source, globals, locals)
            return
        # As exec compiles a text from dataclasses.py: file name "<string>", none of the
        # caller's __future__ flags (dataclasses.py has none).
        code = self.kept(source, lambda: compile(source, "<string>", "exec", dont_inherit=True))
        builtins.exec(code, globals, locals)

    def _load(self) -> dict[str, CodeType | bytes]:
        """The file's entries: a table (``save``) and the entries appended after it (read
        up to the first damaged record)."""
        if self.path is None:
            return {}
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return {}
        except OSError:
            self._appendable = False
            return {}
        header = _header()
        if not data.startswith(header):
            self._appendable = False  # another interpreter's, or damaged: replaced by save
            return {}
        codes: dict[str, CodeType | bytes] = {}
        pos = len(header)
        while pos < len(data):
            size = int.from_bytes(data[pos : pos + 4], "little")
            record = data[pos + 4 : pos + 4 + size]
            pos += 4 + size
            try:
                entries = marshal.loads(record) if len(record) == size else None
            except (EOFError, ValueError, TypeError):
                entries = None
            if not isinstance(entries, dict):
                self._appendable = False
                break
            # Looked up by text and type-checked on use (_code): a start uses half of them.
            codes.update(entries)
        return codes

    def _append(self, key: str, code: CodeType) -> None:
        if self.path is None or sys.dont_write_bytecode or not self._appendable:
            return
        record = marshal.dumps({key: marshal.dumps(code)})
        with self._appending:
            try:
                os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
                with open(self.path, "ab") as f:
                    if f.tell() == 0:
                        f.write(_header())
                    f.write(len(record).to_bytes(4, "little") + record)
            except OSError:
                self._appendable = False

    def save(self) -> None:
        """Rewrite the file as one table (what was on file and what was compiled since),
        if anything was compiled since the last save: atomically (a concurrent reader sees
        the old file or the new one); quietly not at all where it cannot be written."""
        if not self._unsaved or self.path is None or sys.dont_write_bytecode:
            return
        self._unsaved = False  # first: what another thread adds from here is saved next time
        codes = dict(self._codes)
        if len(codes) > MAX_KEPT:
            codes = {text: code for text, code in codes.items() if text in self._used}
        temporary = f"{self.path}.{os.getpid()}.tmp"
        try:
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            on_file = {text: c if isinstance(c, bytes) else marshal.dumps(c) for text, c in codes.items()}
            table = marshal.dumps(on_file)
            with open(temporary, "wb") as f:
                f.write(_header() + len(table).to_bytes(4, "little") + table)
            with self._appending:
                os.replace(temporary, self.path)
                self._appendable = True
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temporary)


# The one in use in this process (``slipstream serve`` installs it).
_installed: KeptCode | None = None


def install(path: str | os.PathLike[str] | None) -> KeptCode:
    """Serve dataclasses and the protocol's compiles from the code kept at ``path``."""
    global _installed
    if _installed is None:
        _installed = KeptCode(path)
        _installed.install()
    return _installed


def save() -> None:
    """Write what the installed one compiled since its last save (nothing if none is)."""
    if _installed is not None:
        _installed.save()


def uninstall() -> None:
    """Save, then compile everything afresh again."""
    global _installed
    if _installed is not None:
        _installed.save()
        _installed.uninstall()
        _installed = None
