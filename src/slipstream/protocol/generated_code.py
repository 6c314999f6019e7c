"""Compiling the protocol layer's generated Python: codecs and struct initializers.

``compile_generated`` is ``compile``, unless the process has a ``keeper`` (set by
``slipstream serve``, cli/kept_code.py): then code compiled from the same text by an
earlier run is used instead of compiling it again.
"""

from __future__ import annotations

from collections.abc import Callable
from types import CodeType
from typing import Protocol


class CodeKeeper(Protocol):
    def kept(self, key: str, make: Callable[[], CodeType]) -> CodeType:
        """The code kept under ``key``, else ``make()``."""
        ...


keeper: CodeKeeper | None = None


def compile_generated(source: str, filename: str) -> CodeType:
    """``compile(source, filename, "exec")`` (with this module's __future__ flags, as the
    generators' own modules have)."""

    def make() -> CodeType:
        return compile(source, filename, "exec")

    if keeper is None:
        return make()
    return keeper.kept(f"{filename}\n{source}", make)
