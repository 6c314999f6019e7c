"""The compiled methods of dataclasses, kept between runs of ``slipstream serve``.

Why: ``dataclasses`` makes each class's ``__init__``, ``__repr__`` and ``__eq__`` (and
for frozen classes ``__setattr__``, ``__delattr__`` and ``__hash__``) by compiling
generated source text, one ``exec`` per method. Some 40 dataclasses are created before
a broker answers its first request, and compiling their methods was about a fifth of the
start's CPU. The text is the same from one run to the next, so its compiled code is kept
in a file beside the package's .pyc files (``sys.pycache_prefix`` honoured, nothing
written under ``sys.dont_write_bytecode``), keyed by the exact text: a changed class
makes a new text, compiled afresh. Running the kept code object makes the same
functions as running the text (file name ``<string>``, no inherited compiler flags,
this interpreter's bytecode version and optimization level).
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import importlib.util
import marshal
import os
import sys
from pathlib import Path
from types import CodeType
from typing import Any

# More texts than this on file (classes changed over many upgrades): a save keeps only
# the ones this process used.
MAX_KEPT = 4096


def default_path() -> Path | None:
    """Where the code is kept: beside this package's .pyc files (None if unknown)."""
    try:
        pyc = importlib.util.cache_from_source(__file__)
    except (NotImplementedError, ValueError):  # no cache tag: nothing is cached anyway
        return None
    return Path(pyc).parent / f"dataclass-code.{sys.implementation.cache_tag}.bin"


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


class DataclassCode:
    """Serves ``dataclasses``' ``exec`` calls from compiled code kept on file."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        # Text -> its code, marshalled: unmarshalled on first use (a file holds the
        # classes of every module a broker may load; a start uses about half of them).
        self._codes: dict[str, CodeType | bytes] = {}
        self._used: set[str] = set()
        self._unsaved = False  # something was compiled that is not on file yet
        self._installed = False

    def install(self) -> None:
        """Load what is on file and serve ``dataclasses``' ``exec`` calls from now on."""
        if self._installed or "exec" in vars(dataclasses):
            return
        self._codes = self._load()
        # The module's global shadows the builtin, for dataclasses' own calls only.
        dataclasses.exec = self._exec  # type: ignore[attr-defined]
        self._installed = True

    def uninstall(self) -> None:
        if self._installed:
            if vars(dataclasses).get("exec") == self._exec:
                del dataclasses.exec  # type: ignore[attr-defined]
            self._installed = False

    def _exec(self, source: Any, globals: Any = None, locals: Any = None) -> None:
        if not isinstance(source, str):
            builtins.exec(source, globals, locals)
            return
        code = _code(self._codes.get(source))
        if code is None:  # a new text (or a damaged file)
            code = compile(source, "<string>", "exec", dont_inherit=True)
            self._unsaved = True
        self._codes[source] = code
        self._used.add(source)
        builtins.exec(code, globals, locals)

    def _load(self) -> dict[str, CodeType | bytes]:
        if self.path is None:
            return {}
        try:
            data = self.path.read_bytes()
        except OSError:
            return {}
        header = _header()
        if not data.startswith(header):
            return {}
        try:
            loaded = marshal.loads(data[len(header) :])
        except (EOFError, ValueError, TypeError):
            return {}
        # Looked up by text and type-checked on use (_exec): a start uses half of them.
        return loaded if isinstance(loaded, dict) else {}

    def save(self) -> None:
        """Write the code compiled since the last save (and what was on file), if any:
        atomically (a concurrent reader sees the old file or the new one); quietly not
        at all where the directory cannot be written."""
        if not self._unsaved or self.path is None or sys.dont_write_bytecode:
            return
        self._unsaved = False  # first: what another thread adds from here is saved next time
        codes = dict(self._codes)
        if len(codes) > MAX_KEPT:
            codes = {text: code for text, code in codes.items() if text in self._used}
        temporary = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            on_file = {text: c if isinstance(c, bytes) else marshal.dumps(c) for text, c in codes.items()}
            temporary.write_bytes(_header() + marshal.dumps(on_file))
            os.replace(temporary, self.path)
        except OSError:
            with contextlib.suppress(OSError):
                temporary.unlink()


# The one serving ``dataclasses`` in this process (``slipstream serve`` installs it).
_installed: DataclassCode | None = None


def install(path: Path | None) -> DataclassCode:
    """Serve ``dataclasses``' ``exec`` calls from the code kept at ``path`` from now on."""
    global _installed
    if _installed is None:
        _installed = DataclassCode(path)
        _installed.install()
    return _installed


def save() -> None:
    """Write what the installed one compiled since its last save (nothing if none is)."""
    if _installed is not None:
        _installed.save()


def uninstall() -> None:
    """Save, then give ``dataclasses`` back its ``exec``."""
    global _installed
    if _installed is not None:
        _installed.save()
        _installed.uninstall()
        _installed = None
